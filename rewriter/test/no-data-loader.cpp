// RUN: %acc-migrate --rules=no-data-loader %s 2>&1 >/dev/null | FileCheck %s
#include <torch/torch.h>

struct Numbers : torch::data::datasets::Dataset<Numbers> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 16; }
};

void manual(torch::nn::Linear &model, torch::Tensor data) {
  for (int64_t i = 0; i < 64; i += 8) {
    // CHECK: no-data-loader.cpp:[[@LINE-1]]:3: no-data-loader: this training loop batches without a torch DataLoader{{.*}}; give each process its share before the loop (`auto part = accelerator.split_between_processes(data);`
    auto loss = model->forward(data).sum();
    loss.backward();
  }
}

void with_loader(torch::nn::Linear &model) {
  auto loader = torch::data::make_data_loader(Numbers(), 8);
  for (int epoch = 0; epoch < 2; ++epoch)
    for (auto &batch : *loader) {
      auto loss = model->forward(batch[0].data).sum();
      loss.backward();
    }
}
// Only the loop in manual() is reported.
// CHECK-NOT: no-data-loader.cpp:

void no_training(torch::Tensor t) {
  for (int i = 0; i < 3; ++i) t = t * 2.0;  // no backward: not a training loop
}
