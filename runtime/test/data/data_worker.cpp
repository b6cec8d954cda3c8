// One rank of a data-loading scenario (started by data_mp_test.cpp through spawn_ranks with
// torchrun's variables). Exits 0 when every check passed; prints "FAIL: ..." and exits 1
// otherwise.
#include <torch/torch.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>

#include <acc/acc.h>

#include "indices_dataset.h"
#include "worker_checks.h"

namespace {

using acc::IndexBatch;
using acc::testing::expect;
using acc::testing::fail;
using acc::testing::as_indices;
using acc::testing::Indices;
using torch::data::samplers::RandomSampler;
using torch::data::samplers::SequentialSampler;

std::string text(const std::vector<IndexBatch>& batches) {
  std::string out;
  for (const auto& b : batches) {
    out += "[";
    for (size_t i = 0; i < b.size(); ++i) out += (i ? "," : "") + std::to_string(b[i]);
    out += "]";
  }
  return out;
}

// The prepared loader gives each rank exactly the batches of the sharding arithmetic (itself
// checked against Accelerate by the parity grid), and len() matches.
void shard() {
  for (bool split : {false, true}) {
    for (bool even : {false, true}) {
      acc::Accelerator accelerator(acc::AcceleratorOptions().split_batches(split).even_batches(even));
      const int processes = accelerator.num_processes();
      for (size_t n : {0, 1, 3, 10, 17}) {
        for (bool drop_last : {false, true}) {
          const size_t batch_size = split ? 2 * processes : 3;
          auto loader = accelerator.prepare_data_loader<SequentialSampler>(
              Indices(n), torch::data::DataLoaderOptions(batch_size).drop_last(drop_last));
          std::vector<IndexBatch> got;
          for (auto& batch : *loader) got.push_back(as_indices(batch));
          std::vector<IndexBatch> base;
          for (size_t i = 0; i < n; i += batch_size) {
            IndexBatch b;
            for (size_t j = i; j < std::min(n, i + batch_size); ++j) b.push_back(j);
            if (!drop_last || b.size() == batch_size) base.push_back(b);
          }
          acc::ShardOptions shard{processes, accelerator.process_index(), split, even};
          const auto expected = acc::shard_batches(base, batch_size, drop_last, shard);
          const std::string where = "n=" + std::to_string(n) + " split=" + std::to_string(split) +
                                    " even=" + std::to_string(even) +
                                    " drop_last=" + std::to_string(drop_last);
          expect(got == expected, where + ": got " + text(got) + ", expected " + text(expected));
          if (!split || even) expect(loader->size() == got.size(), where + ": size()");
        }
      }
    }
  }
}

// Shuffled, uneven dataset: all ranks walk the same permutation each epoch, a different one
// each epoch, and gather_for_metrics over the epoch gives every sample exactly once.
void shuffle() {
  acc::Accelerator accelerator;
  acc::set_seed(17, /*device_specific=*/true);  // ranks' generators differ on purpose
  const int64_t n = 37;
  auto loader = accelerator.prepare_data_loader(Indices(n), 4);
  std::vector<torch::Tensor> epochs;
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<torch::Tensor> gathered;
    for (auto& batch : *loader) gathered.push_back(accelerator.gather_for_metrics(batch));
    auto all = torch::cat(gathered);
    expect(all.size(0) == n, "epoch gathered " + std::to_string(all.size(0)) + " samples");
    expect(torch::equal(std::get<0>(all.sort()), torch::arange(n)), "not a permutation");
    auto everyone = accelerator.gather(all.unsqueeze(0));
    for (int64_t r = 1; r < everyone.size(0); ++r) {
      expect(torch::equal(everyone[r], everyone[0]), "ranks disagree on the order");
    }
    epochs.push_back(all);
  }
  expect(!torch::equal(epochs[0], epochs[1]) && !torch::equal(epochs[1], epochs[2]),
         "epochs shuffled alike");
}

// Distributed evaluation over an eval set that is not a multiple of the global batch: the
// accuracy equals the single-process accuracy exactly and every sample is counted once.
void evaluate() {
  acc::Accelerator accelerator;
  const int64_t n = 53;
  torch::manual_seed(0);
  auto inputs = torch::randn({n, 8});
  auto labels = torch::randint(0, 3, {n});
  torch::nn::Linear model(8, 3);
  torch::NoGradGuard no_grad;
  const auto single = (model->forward(inputs).argmax(1) == labels).sum().item<int64_t>();

  auto dataset = torch::data::datasets::TensorDataset({torch::arange(n)})
                     .map(torch::data::transforms::Stack<torch::data::TensorExample>());
  auto loader = accelerator.prepare_data_loader<SequentialSampler>(std::move(dataset), 4);
  int64_t counted = 0, correct = 0;
  for (auto& batch : *loader) {
    auto rows = batch.data.flatten();
    auto predictions = model->forward(inputs.index_select(0, rows)).argmax(1);
    auto [all_predictions, all_labels] = accelerator.gather_for_metrics(
        std::make_pair(predictions, labels.index_select(0, rows)));
    counted += all_predictions.size(0);
    correct += (all_predictions == all_labels).sum().item<int64_t>();
  }
  expect(counted == n, "gathered " + std::to_string(counted) + " predictions for " +
                           std::to_string(n) + " samples");
  expect(correct == single, "distributed accuracy " + std::to_string(correct) + "/" +
                                std::to_string(n) + " != single-process " + std::to_string(single));
  std::cout << "accuracy " << correct << "/" << counted << std::endl;
}

// An empty dataset ends the loop on every rank; a dataset smaller than the number of
// processes is cycled (Accelerate) and gather_for_metrics still counts it once.
void small() {
  acc::Accelerator accelerator;
  auto empty = accelerator.prepare_data_loader(Indices(0), 4);
  for (auto& batch : *empty) fail("empty dataset yielded " + text({as_indices(batch)}));
  accelerator.wait_for_everyone();
  auto tiny = accelerator.prepare_data_loader<SequentialSampler>(Indices(1), 1);
  int64_t batches = 0, kept = 0;
  for (auto& batch : *tiny) {
    expect(as_indices(batch) == IndexBatch{0}, "tiny dataset batch");
    kept += accelerator.gather_for_metrics(batch).size(0);
    ++batches;
  }
  expect(batches == 1 && kept == 1, "tiny dataset: " + std::to_string(kept) + " kept");
}

// A sampler that orders differently on each rank is an error on every rank, not silent misuse.
class RankDependentSampler : public SequentialSampler {
 public:
  explicit RankDependentSampler(size_t size) : SequentialSampler(size), size_(size) {}
  void reset(std::optional<size_t> = std::nullopt) override {
    SequentialSampler::reset();
    if (acc::PartialState().process_index() == 1) skipped_ = true;
  }
  std::optional<std::vector<size_t>> next(size_t batch_size) override {
    auto batch = SequentialSampler::next(batch_size);
    if (skipped_ && batch) std::reverse(batch->begin(), batch->end());
    return batch;
  }

 private:
  size_t size_;
  bool skipped_ = false;
};

void mismatch() {
  acc::Accelerator accelerator;
  auto loader = accelerator.prepare_data_loader(Indices(8), RankDependentSampler(8),
                                                torch::data::DataLoaderOptions(2));
  try {
    for (auto& batch : *loader) (void)batch;
  } catch (const acc::DistributedError& e) {
    std::cout << "caught: " << e.what() << std::endl;
    return;
  }
  fail("ranks with different sample orders were not detected");
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::function<void()>> scenarios{
      {"shard", shard}, {"shuffle", shuffle}, {"evaluate", evaluate},
      {"small", small}, {"mismatch", mismatch}};
  if (argc < 2 || !scenarios.count(argv[1])) fail("usage: acc_data_worker SCENARIO");
  try {
    scenarios.at(argv[1])();
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
  return 0;
}
