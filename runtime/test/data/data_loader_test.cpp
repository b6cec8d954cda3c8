// The prepared data loader on one process, the sharding of shuffled epochs (ranks simulated by
// explicit process indices), and acc::to_device.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <acc/acc.h>

#include "env_fixture.h"
#include "indices_dataset.h"

namespace {

using acc::IndexBatch;
using acc::testing::as_indices;
using acc::testing::Indices;
using torch::data::samplers::RandomSampler;
using torch::data::samplers::SequentialSampler;

acc::AcceleratorOptions single_process() {
  return acc::AcceleratorOptions().environment(acc::testing::fake_env({}));
}

template <typename Loader>
std::vector<IndexBatch> epoch_of(Loader& loader) {
  std::vector<IndexBatch> out;
  for (auto& batch : loader) out.push_back(as_indices(batch));
  return out;
}

// --- to_device -------------------------------------------------------------------------------

}  // namespace

namespace user {
struct Batch {
  torch::Tensor tokens;
  std::string id;
};
Batch to_device(const Batch& batch, const torch::Device& device, bool non_blocking) {
  return {acc::to_device(batch.tokens, device, non_blocking), batch.id};
}
}  // namespace user

namespace {

TEST(ToDevice, MovesEveryTensorOfNestedStructures) {
  const torch::Device meta("meta");
  auto t = torch::ones({2});
  EXPECT_TRUE(acc::to_device(t, meta).is_meta());
  auto example = acc::to_device(torch::data::Example<>(t, t), meta);
  EXPECT_TRUE(example.data.is_meta() && example.target.is_meta());
  EXPECT_TRUE(acc::to_device(torch::data::TensorExample(t), meta).data.is_meta());

  std::map<std::string, std::vector<std::optional<torch::Tensor>>> nested{
      {"a", {t, std::nullopt}}};
  auto moved = acc::to_device(nested, meta);
  EXPECT_TRUE(moved["a"][0]->is_meta());
  EXPECT_FALSE(moved["a"][1].has_value());

  auto tuple = acc::to_device(std::make_tuple(t, std::string("name"), 3), meta);
  EXPECT_TRUE(std::get<0>(tuple).is_meta());
  EXPECT_EQ(std::get<1>(tuple), "name");
  EXPECT_EQ(std::get<2>(tuple), 3);
  auto pair = acc::to_device(std::make_pair(t, std::unordered_map<std::string, torch::Tensor>{{"x", t}}), meta);
  EXPECT_TRUE(pair.first.is_meta() && pair.second["x"].is_meta());
}

TEST(ToDevice, FindsUserOverloadsByArgumentDependentLookup) {
  const torch::Device meta("meta");
  std::vector<user::Batch> batches{{torch::ones({1}), "x"}};
  auto moved = acc::detail::place(batches, meta, false);
  EXPECT_TRUE(moved[0].tokens.is_meta());
  EXPECT_EQ(moved[0].id, "x");
}

// --- sharding ---------------------------------------------------------------------------------

TEST(Sharding, SplitBatchesNeedsADivisibleBatchSize) {
  try {
    acc::BatchSamplerShard<SequentialSampler> sampler(SequentialSampler(10), 3, false,
                                                      acc::ShardOptions{2, 0, true, true});
    FAIL() << "expected a ConfigError";
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("split_batches needs the batch size (3"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("use a batch size of 4"), std::string::npos) << e.what();
  }
}

// The epoch's permutation, drawn as BatchSamplerShard draws it.
std::vector<size_t> permutation(size_t n, uint64_t seed) {
  std::vector<size_t> order;
  RandomSampler sampler(n);
  acc::with_seeded_generator(seed, [&] {
    sampler.reset(n);
    while (auto batch = sampler.next(n)) order.insert(order.end(), batch->begin(), batch->end());
  });
  return order;
}

TEST(Sharding, ShuffledEpochsArePartitionedLikeUnshuffledPositions) {
  const uint64_t seed = 1234;
  for (int processes : {1, 2, 3, 4}) {
    for (size_t n : {0, 1, 3, 10, 17, 64}) {
      for (size_t batch_size : {1, 4}) {
        for (bool split : {false, true}) {
          for (bool even : {false, true}) {
            for (bool drop_last : {false, true}) {
              if (split && batch_size % processes != 0) continue;
              for (int rank = 0; rank < processes; ++rank) {
                acc::ShardOptions shard{processes, rank, split, even};
                acc::BatchSamplerShard<SequentialSampler> plain(SequentialSampler(n), batch_size,
                                                                drop_last, shard);
                acc::BatchSamplerShard<RandomSampler> shuffled(RandomSampler(n), batch_size,
                                                               drop_last, shard, seed);
                plain.reset();
                std::vector<IndexBatch> positions;
                while (auto b = plain.next(batch_size)) positions.push_back(*b);
                for (uint64_t epoch : {0, 1}) {
                  shuffled.reset();
                  const auto order = permutation(n, seed + epoch);
                  for (const auto& batch : positions) {
                    auto got = shuffled.next(batch_size);
                    ASSERT_TRUE(got.has_value());
                    IndexBatch expected;
                    for (size_t position : batch) expected.push_back(order[position]);
                    ASSERT_EQ(*got, expected) << "P=" << processes << " n=" << n << " rank " << rank;
                  }
                  EXPECT_FALSE(shuffled.next(batch_size).has_value());
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_NE(permutation(64, seed), permutation(64, seed + 1));
}

// --- the prepared loader on one process -------------------------------------------------------

TEST(PreparedLoader, MatchesLibtorchsLoaderAndKnowsItsEnd) {
  acc::Accelerator accelerator(single_process());
  auto loader = accelerator.prepare_data_loader<SequentialSampler>(Indices(10), 4);
  auto plain = torch::data::make_data_loader<SequentialSampler>(Indices(10), 4);
  EXPECT_EQ(loader->size(), 3u);
  std::vector<IndexBatch> expected = epoch_of(*plain);
  std::vector<IndexBatch> got;
  std::vector<bool> ends;
  for (auto& batch : *loader) {
    got.push_back(as_indices(batch));
    ends.push_back(loader->end_of_dataloader());
    EXPECT_EQ(loader->remainder(), 2);
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(ends, (std::vector<bool>{false, false, true}));
}

TEST(PreparedLoader, DropLastHasNoRemainder) {
  acc::Accelerator accelerator(single_process());
  auto loader = accelerator.prepare_data_loader<SequentialSampler>(
      Indices(10), torch::data::DataLoaderOptions(4).drop_last(true));
  EXPECT_EQ(epoch_of(*loader), (std::vector<IndexBatch>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(loader->size(), 2u);
  EXPECT_EQ(loader->remainder(), -1);
}

TEST(PreparedLoader, EmptyDatasetGivesAnEmptyLoop) {
  acc::Accelerator accelerator(single_process());
  auto loader = accelerator.prepare_data_loader(Indices(0), 4);
  EXPECT_TRUE(epoch_of(*loader).empty());
  EXPECT_TRUE(epoch_of(*loader).empty());
  EXPECT_EQ(loader->size(), 0u);
}

TEST(PreparedLoader, ShufflesDifferentlyEachEpochAndSetEpochReplays) {
  acc::Accelerator accelerator(single_process());
  auto loader = accelerator.prepare_data_loader(Indices(64), 8);  // RandomSampler, as libtorch
  torch::manual_seed(5);
  const auto reference = torch::rand({3});
  torch::manual_seed(5);
  auto first = epoch_of(*loader);
  auto second = epoch_of(*loader);
  EXPECT_TRUE(torch::equal(torch::rand({3}), reference)) << "the loader changed the user's RNG";
  EXPECT_NE(first, second);
  EXPECT_EQ(loader->epoch(), 2u);
  loader->set_epoch(0);
  EXPECT_EQ(epoch_of(*loader), first);
  std::vector<size_t> all;
  for (const auto& b : second) all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], i);
}

TEST(PreparedLoader, OnlyAShufflingLoaderDrawsItsSeedFromTheUsersGenerator) {
  // Accelerate seeds only samplers that shuffle; an in-order loader must leave the random stream
  // as the program without acc had it (datasets made after the loader stay the same).
  acc::Accelerator accelerator(single_process());
  torch::manual_seed(7);
  const auto reference = torch::rand({3});
  torch::manual_seed(7);
  auto in_order = accelerator.prepare_data_loader<SequentialSampler>(Indices(10), 4);
  EXPECT_TRUE(torch::equal(torch::rand({3}), reference)) << "an in-order loader drew a seed";
  torch::manual_seed(7);
  auto shuffled = accelerator.prepare_data_loader(Indices(10), 4);
  EXPECT_FALSE(torch::equal(torch::rand({3}), reference))
      << "a shuffling loader must take its seed from torch's generator, so set_seed decides it";
}

TEST(PreparedLoader, SkipFirstBatchesResumesOnceThenIteratesFully) {
  acc::Accelerator accelerator(single_process());
  auto loader = accelerator.prepare_data_loader<SequentialSampler>(Indices(10), 3);
  accelerator.skip_first_batches(loader, 2);
  EXPECT_EQ(epoch_of(*loader), (std::vector<IndexBatch>{{6, 7, 8}, {9}}));
  EXPECT_EQ(epoch_of(*loader).size(), 4u);
  loader->skip_first_batches(10);
  EXPECT_TRUE(epoch_of(*loader).empty());
}

TEST(PreparedLoader, WorkersGiveTheSameBatchesInOrder) {
  acc::Accelerator accelerator(single_process());
  auto serial = accelerator.prepare_data_loader<SequentialSampler>(Indices(37), 4);
  auto threaded = accelerator.prepare_data_loader<SequentialSampler>(
      Indices(37), torch::data::DataLoaderOptions(4).workers(2));
  EXPECT_EQ(epoch_of(*threaded), epoch_of(*serial));
}

TEST(PreparedLoader, ExplicitSamplerObject) {
  acc::Accelerator accelerator(single_process());
  auto loader = accelerator.prepare_data_loader(Indices(5), SequentialSampler(5),
                                                torch::data::DataLoaderOptions(2));
  EXPECT_EQ(epoch_of(*loader), (std::vector<IndexBatch>{{0, 1}, {2, 3}, {4}}));
}

TEST(PreparedLoader, MapDatasetsWithStackAreMovedToTheDevice) {
  acc::Accelerator accelerator(single_process());
  auto dataset = torch::data::datasets::TensorDataset(torch::arange(6).reshape({6, 1}))
                     .map(torch::data::transforms::Stack<torch::data::TensorExample>());
  auto loader = accelerator.prepare_data_loader<SequentialSampler>(std::move(dataset), 4);
  int64_t rows = 0;
  for (auto& batch : *loader) {
    EXPECT_EQ(batch.data.device(), accelerator.device());
    rows += batch.data.size(0);
  }
  EXPECT_EQ(rows, 6);
}

// gather_for_metrics trims by the innermost loader being iterated; an evaluation loop inside a
// training loop must not disturb the training loader's state.
TEST(PreparedLoader, NestedLoadersKeepTheirOwnEndAndRemainder) {
  acc::Accelerator accelerator(single_process());
  auto train = accelerator.prepare_data_loader<SequentialSampler>(Indices(10), 4);  // rem 2
  auto eval = accelerator.prepare_data_loader<SequentialSampler>(Indices(7), 4);    // rem 3
  const auto four = torch::arange(4);
  EXPECT_EQ(accelerator.gather_for_metrics(four).size(0), 4) << "outside any loader";
  std::vector<int64_t> kept;
  for (auto& batch : *train) {
    (void)batch;
    for (auto& eval_batch : *eval) {
      (void)eval_batch;
      kept.push_back(accelerator.gather_for_metrics(four).size(0));
    }
    kept.push_back(accelerator.gather_for_metrics(four).size(0));
    for (auto& eval_batch : *eval) {  // left early: the loader leaves the stack too
      (void)eval_batch;
      break;
    }
    kept.push_back(accelerator.gather_for_metrics(four).size(0));
  }
  EXPECT_EQ(kept, (std::vector<int64_t>{4, 3, 4, 4, 4, 3, 4, 4, 4, 3, 2, 2}));
}

}  // namespace
