// gather-for-metrics (off by default) gathers the operands of a count over a loader's batches that a
// later division by the dataset's size uses: then every process counts the whole dataset once.
// RUN: %acc-migrate --rules=gather-for-metrics %s -- %stub-flags 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=ALONE %s < %t.err
// ALONE-NOT: gather-for-metrics:
// ALONE-NOT: dataset-size-division:
// With dataset-size-division, the rewritten counts are not reported; the others still are.
// RUN: %acc-migrate --rules=dataset-size-division,gather-for-metrics %s -- %stub-flags 2>&1 >/dev/null \
// RUN:   | FileCheck --check-prefix=REPORT %s
// Running again on the output changes nothing: gathered operands are not gathered twice.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/metric.cpp
// RUN: %acc-migrate --in-place --rules=gather-for-metrics %t/metric.cpp -- %stub-flags
// RUN: %acc-migrate --rules=gather-for-metrics %t/metric.cpp -- %stub-flags > %t/again.diff
// RUN: not grep . %t/again.diff
#include <torch/torch.h>

struct Digits : torch::data::datasets::Dataset<Digits> {};

double evaluate(torch::nn::Linear &model, Digits &test_set) {
  auto loader = torch::data::make_data_loader(test_set, 64);
  const size_t test_size = test_set.size().value();
  int64_t correct = 0;
  int64_t positives = 0;
  for (auto &batch : *loader) {
    auto pred = model->forward(batch[0].data).argmax(1);
    correct += pred.eq(batch[0].target).sum().item<int64_t>();
    // CHECK: {{^}}-    correct += pred.eq(batch[0].target).sum().item<int64_t>();
    // CHECK-NEXT: {{^}}+    correct += accelerator.gather_for_metrics(pred).eq(accelerator.gather_for_metrics(batch[0].target)).sum().item<int64_t>();
    positives += pred.sum().item<int64_t>();  // not a comparison
  }
  double accuracy = static_cast<double>(correct) / test_size;
  // REPORT-NOT: gather-for-metrics.cpp:[[@LINE-1]]:{{.*}}dataset-size-division
  double rate = static_cast<double>(positives) / test_size;
  // REPORT: gather-for-metrics.cpp:[[@LINE-1]]:48: dataset-size-division: divides by the size of the whole dataset
  return accuracy + rate;
}

template <typename T>
T count_correct(torch::Tensor pred, Digits &test_set) {
  T correct = 0;
  for (auto &batch : *torch::data::make_data_loader(test_set, 64))
    correct += pred.eq(batch[0].target).sum().template item<T>();
  // CHECK: {{^}}-    correct += pred.eq(batch[0].target).sum().template item<T>();
  // CHECK-NEXT: {{^}}+    correct += accelerator.gather_for_metrics(pred).eq(accelerator.gather_for_metrics(batch[0].target)).sum().template item<T>();
  return correct / test_set.size().value();
  // REPORT-NOT: gather-for-metrics.cpp:[[@LINE-1]]:{{.*}}dataset-size-division
}
template double count_correct<double>(torch::Tensor, Digits &);

double outside_loader(torch::Tensor pred, torch::Tensor target, Digits &test_set) {
  double correct = 0;
  for (int step = 0; step < 3; ++step) correct += pred.eq(target).sum().item<double>();
  // CHECK-NOT: {{^}}+{{.*}}gather_for_metrics(target)
  return correct / test_set.size().value();
  // REPORT: gather-for-metrics.cpp:[[@LINE-1]]:18: dataset-size-division:
}
