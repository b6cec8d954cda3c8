// reduce-metrics: a number accumulated over a loader's batches and read after the loop holds, with a
// prepared loader, this process's share; after the loop it is reduced over processes, "mean" for
// sums of per-batch means (a default loss), "sum" for sums over samples (counts, Reduction::Sum).
// RUN: %acc-migrate --rules=reduce-metrics %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT --allow-empty %s < %t.err
// REPORT-NOT: reduce-metrics:
// With gather-for-metrics, the counts it gathers are counted over every process already: not reduced.
// RUN: %acc-migrate --rules=gather-for-metrics,reduce-metrics %s | FileCheck --check-prefix=GATHERED %s
// Running again on the output changes nothing.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/metrics.cpp
// RUN: %acc-migrate --in-place --rules=reduce-metrics %t/metrics.cpp
// RUN: %acc-migrate --rules=reduce-metrics %t/metrics.cpp > %t/again.diff
// RUN: not grep . %t/again.diff
#include <torch/torch.h>

struct Pairs : torch::data::datasets::Dataset<Pairs> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}) * static_cast<double>(i), torch::ones({1})}; }
  torch::optional<size_t> size() const override { return 64; }
};

using Loader = torch::data::StatelessDataLoader<torch::data::datasets::MapDataset<Pairs, torch::data::transforms::Stack<>>,
                                                torch::data::samplers::SequentialSampler>;

double train_epoch(torch::nn::Linear &model, Loader &loader, torch::optim::SGD &optimizer) {
  double total = 0;
  int64_t batches = 0;
  for (auto &batch : loader) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
    optimizer.step();
    total += loss.item<double>();
    ++batches;  // every process runs as many batches: the same on each, not reduced
  }
  // CHECK-LABEL: {{^}} double train_epoch(
  // CHECK: {{^}}   }
  // CHECK-NEXT: {{^}}+  total = accelerator.reduce(total, "mean");
  // CHECK-NOT: batches = accelerator.reduce
  return total / batches;
}

double evaluate(torch::nn::Linear &model, Loader &loader, Pairs &test_set) {
  double summed = 0, weighted = 0;
  int64_t seen = 0, correct = 0;
  torch::nn::CrossEntropyLoss criterion(torch::nn::CrossEntropyLossOptions().reduction(torch::kSum));
  for (const auto &batch : loader) {  // a comment after the loop stays where it is
    auto out = model->forward(batch.data);
    summed += torch::nll_loss(out, batch.target.squeeze(1).to(torch::kLong), {}, at::Reduction::Sum).item<double>();
    weighted += torch::mse_loss(out, batch.target).item<double>() * batch.data.size(0);
    seen += batch.target.size(0);
    correct += out.argmax(1).eq(batch.target.squeeze(1)).sum().item<int64_t>();
    summed += criterion(out, batch.target.squeeze(1).to(torch::kLong)).item<double>();
  } // end of evaluation
  // CHECK-LABEL: {{^}} double evaluate(
  // CHECK: {{^}}   } // end of evaluation
  // CHECK-NEXT: {{^}}+  summed = accelerator.reduce(summed, "sum");
  // CHECK-NEXT: {{^}}+  weighted = accelerator.reduce(weighted, "sum");
  // CHECK-NEXT: {{^}}+  seen = accelerator.reduce(seen, "sum");
  // CHECK-NEXT: {{^}}+  correct = accelerator.reduce(correct, "sum");
  // GATHERED-LABEL: {{^}} double evaluate(
  // GATHERED: {{^}}+    correct += accelerator.gather_for_metrics(out.argmax(1)).eq(accelerator.gather_for_metrics(batch.target.squeeze(1))).sum().item<int64_t>();
  // GATHERED: {{^}}+  seen = accelerator.reduce(seen, "sum");
  // GATHERED-NOT: correct = accelerator.reduce
  return (summed + weighted) / seen + static_cast<double>(correct) / test_set.size().value();
}

// Left alone: what is not a share of a sum or a mean, what outlives an epoch, what nobody reads
// after the loop, and a loop some processes may leave early.
double left_alone(torch::nn::Linear &model, Loader &loader, torch::Tensor flag) {
  double kept = 0, result = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    double best = 0, mixed = 0, never_read = 0, ratio = 0;
    for (auto &batch : loader) {
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      best = std::max(best, loss.item<double>());  // a maximum: reduce-metrics does not guess
      mixed += loss.item<double>();  // a mean and a count added together
      mixed += batch.target.size(0);
      never_read += loss.item<double>();
      kept += loss.item<double>();  // declared before the epoch loop, never reset
      ratio += loss.item<double>() / batch.target.sum().item<double>();  // a mean over a sum: neither
    }
    result += best + mixed + ratio;
  }
  double partial = 0;
  if (flag.item<bool>()) {
    for (auto &batch : loader) partial += torch::mse_loss(model->forward(batch.data), batch.target).item<double>();
    partial += 0;
  }
  // Checked between the hunks of evaluate and templated (left_alone has none):
  // CHECK-NOT: {{(best|mixed|never_read|kept|ratio|partial|result) = accelerator.reduce}}
  return result + kept + partial;
}

// In a template, the instantiations decide, and the line is written once into the template's text.
template <typename Model>
double templated(Model &model, Loader &loader) {
  double total = 0;
  for (auto &batch : loader) total += torch::mse_loss(model->forward(batch.data), batch.target).template item<double>();
  // CHECK-LABEL: {{^}} double templated(
  // CHECK: {{^}}   for (auto &batch : loader) total +=
  // CHECK-NEXT: {{^}}+  total = accelerator.reduce(total, "mean");
  // CHECK-NOT: {{^}}+{{.*}}accelerator.reduce
  return total;
}
template double templated<torch::nn::Linear>(torch::nn::Linear &, Loader &);
