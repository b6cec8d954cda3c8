// RUN: %acc-migrate --rules=view-batch-size %s 2>&1 >/dev/null | FileCheck %s
#include <torch/torch.h>

struct Images : torch::data::datasets::Dataset<Images> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 16; }
};

void train(torch::nn::Linear &model, int64_t batch_size) {
  auto loader = torch::data::make_data_loader(Images(), batch_size);
  for (auto &batch : *loader) {
    auto x = batch[0].data.view({batch_size, -1});
    // CHECK: view-batch-size.cpp:[[@LINE-1]]:34: view-batch-size: assumes every batch has `batch_size` rows{{.*}}; take the row count from the tensor: `batch[0].data.size(0)` instead of `batch_size`
    auto y = x.reshape({x.size(0), -1});  // already from the tensor
    // CHECK-NOT: view-batch-size.cpp:[[@LINE-1]]
    model->forward(y).sum().backward();
  }
  torch::Tensor all;
  auto flat = all.view({batch_size, -1});  // not a loader batch
  // CHECK-NOT: view-batch-size.cpp:[[@LINE-1]]
}
