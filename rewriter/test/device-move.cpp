// RUN: %acc-migrate --rules=device-move %s | FileCheck --check-prefixes=CHECK,ALONE %s
// A model's move goes only when an inserted accelerator.prepare places it: device-move consumes the
// fact prepared-models, which the prepare rule produces.
// RUN: %acc-migrate --rules=prepare,device-move %s | FileCheck --check-prefixes=CHECK,PREPARED %s
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x) {
    // Inside the model: follows its own tensors, stays.
    return x.to(torch::kCUDA);
  }
};
// CHECK-NOT: {{^}}-    return x.to(torch::kCUDA);

struct Data : torch::data::datasets::Dataset<Data> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 16; }
};

int main() {
  torch::Device device(torch::kCUDA);
  auto model = std::make_shared<NetImpl>();
  model->to(device);
  // PREPARED: {{^}}-  model->to(device);
  // ALONE-NOT: {{^}}-  model->to(device);
  auto frozen = std::make_shared<NetImpl>();  // not prepared (no optimizer): keeps its move
  frozen->to(device);
  // CHECK-NOT: {{^}}-  frozen->to(device);
  torch::optim::Adam optimizer(model->parameters());
  auto loader = torch::data::make_data_loader(Data{}, 8);
  for (auto &batch : *loader) {
    auto x = batch[0].data.to(device);
    // CHECK: {{^}}-    auto x = batch[0].data.to(device);
    // CHECK-NEXT: {{^}}+    auto x = batch[0].data;
    auto y = batch[0].target.to(device, torch::kF64);
    // CHECK: {{^}}-    auto y = batch[0].target.to(device, torch::kF64);
    // CHECK-NEXT: {{^}}+    auto y = batch[0].target.to(torch::kF64);
    auto z = batch[0].data.to(torch::kF32).to(device).div(255.0);
    // CHECK: {{^}}+    auto z = batch[0].data.to(torch::kF32).div(255.0);
    auto w = batch[0].data;
    w = w.to(device);
    // CHECK: {{^}}-    w = w.to(device);
    auto c = batch[0].data.cuda();
    // CHECK: {{^}}+    auto c = batch[0].data;
    auto dtype_only = x.to(torch::kF64);
    auto follow = x.to(y.device());
    auto cpu = x.to(torch::kCPU);
    // CHECK-NOT: {{^}}-    auto dtype_only
    // CHECK-NOT: {{^}}-    auto follow
    // CHECK-NOT: {{^}}-    auto cpu
    auto noise = torch::randn({4}).to(device);  // made here: still needs the device
    // CHECK-NOT: {{^}}-    auto noise
    auto eps = torch::randn({4}).cuda();
    // CHECK: {{^}}-    auto eps = torch::randn({4}).cuda();
    // CHECK-NEXT: {{^}}+    auto eps = torch::randn({4}).to(accelerator.device());
    auto hard = torch::randn({4}).to(torch::kCUDA);
    // CHECK: {{^}}+    auto hard = torch::randn({4}).to(accelerator.device());
    auto loss = torch::nll_loss(model->forward(x), y);
  }
}

void dtype_kept() {
  auto net = std::make_shared<NetImpl>();
  net->to(torch::Device(torch::kCUDA), torch::kF64);
  // PREPARED: {{^}}-  net->to(torch::Device(torch::kCUDA), torch::kF64);
  // PREPARED-NEXT: {{^}}+  net->to(torch::kF64);
  // Not prepared: it keeps its move, to the process's device.
  // ALONE: {{^}}-  net->to(torch::Device(torch::kCUDA), torch::kF64);
  // ALONE-NEXT: {{^}}+  net->to(accelerator.device(), torch::kF64);
  torch::optim::Adam opt(net->parameters());
}
