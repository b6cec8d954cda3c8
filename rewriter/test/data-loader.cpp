// RUN: %acc-migrate --rules=data-loader %s | FileCheck %s
#include <torch/torch.h>

struct Data : torch::data::datasets::Dataset<Data> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 16; }
};
using namespace torch::data;

void train() {
  auto a = torch::data::make_data_loader(Data{}, 64);
  // CHECK: {{^}}+  auto a = accelerator.prepare_data_loader(Data{}, 64);
  auto b = make_data_loader<samplers::SequentialSampler>(Data{}, DataLoaderOptions(32).workers(2));
  // CHECK: {{^}}+  auto b = accelerator.prepare_data_loader<samplers::SequentialSampler>(Data{}, DataLoaderOptions(32).workers(2));
  std::unique_ptr<StatelessDataLoader<Data, samplers::RandomSampler>> c =
      ::torch::data::make_data_loader<samplers::RandomSampler>(Data{}, 16);
  // CHECK: {{^}}+  auto c =
  // CHECK-NEXT: {{^}}+      accelerator.prepare_data_loader<samplers::RandomSampler>(Data{}, 16);
}
