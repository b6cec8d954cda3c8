// RUN: %acc-migrate --rules=dataset-size-division %s -- %stub-flags 2>&1 >/dev/null | FileCheck %s
#include <torch/torch.h>

struct Digits : torch::data::datasets::Dataset<Digits> {};

double accuracy(Digits &test_set, int64_t correct) {
  const size_t test_size = test_set.size().value();
  double through_variable = static_cast<double>(correct) / test_size;
  // CHECK: dataset-size-division.cpp:[[@LINE-1]]:58: dataset-size-division: divides by the size of the whole dataset, but with a prepared loader each process counts only its shard, and the loader repeats samples to even out the shards; gather each batch's predictions and targets with `accelerator.gather_for_metrics(...)` (it drops the repeated samples), compute `static_cast<double>(correct)` from the gathered tensors and divide by the number of gathered samples (summing the count with `accelerator.reduce` would count the repeats; --rules=+gather-for-metrics rewrites `count += a.eq(b).sum().item<T>()` in the loader loop)
  double direct = 100.0 * correct / test_set.size().value();
  // CHECK: dataset-size-division.cpp:[[@LINE-1]]:35: dataset-size-division:
  double per_batch = correct / 64.0;  // not a dataset size
  // CHECK-NOT: dataset-size-division.cpp:[[@LINE-1]]
  return through_variable + direct + per_batch;
}
