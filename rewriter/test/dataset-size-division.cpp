// dataset-size-division reports counts divided by the whole dataset's size: with a prepared loader
// each process counts only its shard.
// RUN: %acc-migrate --rules=dataset-size-division %s 2>&1 >/dev/null | FileCheck %s
// With reduce-metrics, a count summed over the processes after its loop gets a note instead: the sum
// includes the samples the loader repeats to even out the processes.
// RUN: %acc-migrate --rules=reduce-metrics,dataset-size-division %s 2>&1 >/dev/null | FileCheck --check-prefix=REDUCED %s
#include <torch/torch.h>

struct Digits : torch::data::datasets::Dataset<Digits> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}) * static_cast<double>(i), torch::tensor(1)}; }
  torch::optional<size_t> size() const override { return 100; }
};

double accuracy(Digits &test_set, int64_t correct) {
  const size_t test_size = test_set.size().value();
  double through_variable = static_cast<double>(correct) / test_size;
  // CHECK: dataset-size-division.cpp:[[@LINE-1]]:58: dataset-size-division: divides by the size of the whole dataset, but with a prepared loader each process counts only its shard, and the loader repeats samples to even out the shards; gather each batch's predictions and targets with `accelerator.gather_for_metrics(...)` (it drops the repeated samples), compute `static_cast<double>(correct)` from the gathered tensors and divide by the number of gathered samples (summing the count with `accelerator.reduce` would count the repeats)
  double direct = 100.0 * correct / test_set.size().value();
  // CHECK: dataset-size-division.cpp:[[@LINE-1]]:35: dataset-size-division:
  double per_batch = correct / 64.0;  // not a dataset size
  // CHECK-NOT: dataset-size-division.cpp:[[@LINE-1]]
  return through_variable + direct + per_batch;
}

double positives(torch::nn::Linear &model, Digits &test_set) {
  auto loader = torch::data::make_data_loader(test_set.map(torch::data::transforms::Stack<>()), 10);
  int64_t count = 0;
  for (auto &batch : *loader) count += model->forward(batch.data).argmax(1).sum().item<int64_t>();
  return static_cast<double>(count) / test_set.size().value();
  // CHECK: dataset-size-division.cpp:[[@LINE-1]]:37: dataset-size-division: divides by the size of the whole dataset
  // REDUCED: dataset-size-division.cpp:[[@LINE-2]]:37: dataset-size-division: `static_cast<double>(count)` is summed over the processes after its loop (reduce-metrics), which also counts the samples the prepared loader repeats {{.*}}; for an exact count, compute it from gathered predictions and targets, `accelerator.gather_for_metrics(...)`, which drops the repeats
}
