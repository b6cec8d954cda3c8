// create-accelerator is a finalizer: it always runs, on the fact accelerator-users, here produced by
// backward (the only rule this test selects).
// RUN: %acc-migrate --rules=backward %s | FileCheck %s
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) { return x; }
};
struct Data : torch::data::datasets::Dataset<Data> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 16; }
};

// The loop lives in a function template called from main: main creates the accelerator and
// passes it; the template takes it as its first parameter.
template <typename Loader>
void train_epoch(NetImpl &model, Loader &loader, torch::optim::Optimizer &optimizer) {
  // CHECK: {{^}}-void train_epoch(NetImpl &model, Loader &loader, torch::optim::Optimizer &optimizer) {
  // CHECK-NEXT: {{^}}+void train_epoch(acc::Accelerator& accelerator, NetImpl &model, Loader &loader, torch::optim::Optimizer &optimizer) {
  for (auto &batch : loader) {
    auto loss = model.forward(batch[0].data);
    loss.backward();
    // CHECK: {{^}}+    accelerator.backward(loss);
  }
}

void log_only() {}  // uses nothing from acc: untouched

int main() {
  // CHECK: {{^}} int main() {
  // CHECK-NEXT: {{^}}+  acc::Accelerator accelerator;
  NetImpl model;
  torch::optim::Adam optimizer(model.parameters());
  auto loader = torch::data::make_data_loader(Data{}, 8);
  for (int epoch = 0; epoch < 2; ++epoch) train_epoch(model, *loader, optimizer);
  // CHECK: {{^}}+  for (int epoch = 0; epoch < 2; ++epoch) train_epoch(accelerator, model, *loader, optimizer);
  log_only();
}
// CHECK-NOT: {{^}}+{{.*}}log_only
