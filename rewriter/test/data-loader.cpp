// RUN: %acc-migrate --rules=data-loader %s -- %stub-flags | FileCheck %s
#include <torch/torch.h>

struct Data : torch::data::datasets::Dataset<Data> {};
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
