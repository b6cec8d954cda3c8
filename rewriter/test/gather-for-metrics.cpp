// gather-for-metrics gathers the operands of a count over a loader's batches that a later division
// by the dataset's size uses: then every process counts the whole dataset once. It parses the real
// libtorch: `sum()` is declared `sum(std::optional<ScalarType> dtype = std::nullopt)`, a call with
// one defaulted argument.
// RUN: %acc-migrate --rules=gather-for-metrics %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=ALONE %s < %t.err
// ALONE-NOT: gather-for-metrics:
// ALONE-NOT: dataset-size-division:
// With dataset-size-division, the rewritten counts are not reported; the others still are.
// RUN: %acc-migrate --rules=dataset-size-division,gather-for-metrics %s 2>&1 >/dev/null \
// RUN:   | FileCheck --check-prefix=REPORT %s
// Running again on the output changes nothing: gathered operands are not gathered twice.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/metric.cpp
// RUN: %acc-migrate --in-place --rules=gather-for-metrics %t/metric.cpp
// RUN: %acc-migrate --rules=gather-for-metrics %t/metric.cpp > %t/again.diff
// RUN: not grep . %t/again.diff
#include <torch/torch.h>

struct Digits : torch::data::datasets::Dataset<Digits> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}) * static_cast<double>(i), torch::tensor(1)}; }
  torch::optional<size_t> size() const override { return 100; }
};

double evaluate(torch::nn::Linear &model, Digits &test_set) {
  auto loader = torch::data::make_data_loader(test_set.map(torch::data::transforms::Stack<>()), 64);
  const size_t test_size = test_set.size().value();
  int64_t correct = 0, equal = 0, positives = 0;
  double test_loss = 0, mean_loss = 0;
  for (auto &batch : *loader) {
    auto output = model->forward(batch.data);
    auto pred = output.argmax(1);
    correct += pred.eq(batch.target).sum().item<int64_t>();
    // CHECK: {{^}}-    correct += pred.eq(batch.target).sum().item<int64_t>();
    // CHECK-NEXT: {{^}}+    correct += accelerator.gather_for_metrics(pred).eq(accelerator.gather_for_metrics(batch.target)).sum().item<int64_t>();
    equal += (pred == batch.target).sum().item().toLong();
    // CHECK: {{^}}+    equal += (accelerator.gather_for_metrics(pred) == accelerator.gather_for_metrics(batch.target)).sum().item().toLong();
    test_loss += torch::nll_loss(torch::log_softmax(output, 1), batch.target, {}, at::Reduction::Sum).item<double>();
    // CHECK: {{^}}+    test_loss += torch::nll_loss(accelerator.gather_for_metrics(torch::log_softmax(output, 1)), accelerator.gather_for_metrics(batch.target), {}, at::Reduction::Sum).item<double>();
    mean_loss += torch::nll_loss(torch::log_softmax(output, 1), batch.target).item<double>();  // a mean: reduce-metrics'
    // CHECK-NOT: {{^}}+    mean_loss +=
    positives += pred.sum().item<int64_t>();  // not a comparison
    // CHECK-NOT: {{^}}+    positives +=
  }
  double accuracy = static_cast<double>(correct) / test_size;
  // REPORT-NOT: gather-for-metrics.cpp:[[@LINE-1]]:{{.*}}dataset-size-division
  double also = static_cast<double>(equal) / test_size + test_loss / test_size;
  // REPORT-NOT: gather-for-metrics.cpp:[[@LINE-1]]:{{.*}}dataset-size-division
  double rate = static_cast<double>(positives) / test_size + mean_loss / test_size;
  // REPORT: gather-for-metrics.cpp:[[@LINE-1]]:48: dataset-size-division: divides by the size of the whole dataset
  // REPORT: gather-for-metrics.cpp:[[@LINE-2]]:72: dataset-size-division: divides by the size of the whole dataset
  return accuracy + also + rate;
}

template <typename T>
T count_correct(torch::nn::Linear &model, Digits &test_set) {
  T correct = 0;
  for (auto &batch : *torch::data::make_data_loader(test_set.map(torch::data::transforms::Stack<>()), 64))
    correct += model->forward(batch.data).argmax(1).eq(batch.target).sum().template item<T>();
  // CHECK: {{^}}-    correct += model->forward(batch.data).argmax(1).eq(batch.target).sum().template item<T>();
  // CHECK-NEXT: {{^}}+    correct += accelerator.gather_for_metrics(model->forward(batch.data).argmax(1)).eq(accelerator.gather_for_metrics(batch.target)).sum().template item<T>();
  return correct / test_set.size().value();
  // REPORT-NOT: gather-for-metrics.cpp:[[@LINE-1]]:{{.*}}dataset-size-division
}
template double count_correct<double>(torch::nn::Linear &, Digits &);

double outside_loader(torch::Tensor pred, torch::Tensor target, Digits &test_set) {
  double correct = 0;
  for (int step = 0; step < 3; ++step) correct += pred.eq(target).sum().item<double>();
  // CHECK-NOT: {{^}}+{{.*}}gather_for_metrics(target)
  return correct / test_set.size().value();
  // REPORT: gather-for-metrics.cpp:[[@LINE-1]]:18: dataset-size-division:
}
