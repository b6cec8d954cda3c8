// Prepared data loaders in save_state / load_state on one process: the next iteration after
// load_state continues inside the saved epoch (same shuffled order, after the last batch the loop
// had), then the following epochs go on as in the uninterrupted run. Several loaders keep their
// own positions; errors name the fix. (Two processes: ExactResume.* in resume_test.cpp.)
#include <acc/acc.h>

#include <gtest/gtest.h>
#include <torch/serialize/output-archive.h>

#include <filesystem>
#include <vector>

#include "../data/indices_dataset.h"
#include "env_fixture.h"
#include "test_util.h"

namespace fs = std::filesystem;
using acc::testing::as_indices;
using acc::testing::Indices;
using acc::testing::ScratchDir;
using Batches = std::vector<std::vector<size_t>>;

namespace {

acc::AcceleratorOptions single_process() {
  return acc::AcceleratorOptions().environment(acc::testing::fake_env({})).cpu(true);
}

template <typename Loader>
Batches one_pass(Loader& loader) {
  Batches out;
  for (auto& batch : loader) out.push_back(as_indices(batch));
  return out;
}

Batches tail(const Batches& all, size_t from) { return Batches(all.begin() + from, all.end()); }

// Iterates one pass and calls save_state after the loop has had `consumed` batches.
template <typename Loader>
Batches pass_saving_after(acc::Accelerator& accelerator, Loader& loader, size_t consumed,
                          const std::string& dir) {
  Batches out;
  for (auto& batch : loader) {
    out.push_back(as_indices(batch));
    if (out.size() == consumed) accelerator.save_state(dir);
  }
  return out;
}

class LoaderResume : public ::testing::TestWithParam<size_t> {};

}  // namespace

// With workers, libtorch fetches batches ahead of the loop: the position counts what the loop
// was handed, not what was fetched.
TEST_P(LoaderResume, ContinuesInsideTheSavedEpochThenWithTheNextOnes) {
  ScratchDir dir;
  acc::Accelerator accelerator(single_process());
  const auto options = torch::data::DataLoaderOptions(3).workers(GetParam());
  auto loader = accelerator.prepare_data_loader(Indices(23), options);
  one_pass(*loader);  // the save lands in epoch 1, not the first
  const auto saved_epoch = pass_saving_after(accelerator, *loader, 4, dir / "ckpt");
  const auto next_epoch = one_pass(*loader);
  ASSERT_EQ(saved_epoch.size(), 8u);
  loader.reset();  // a new program prepares its loader anew

  torch::rand({5});  // the generator moved on: the new loader draws another shuffle seed
  auto resumed = accelerator.prepare_data_loader(Indices(23), options);
  ASSERT_NE(one_pass(*resumed), saved_epoch) << "the test needs a loader that shuffles differently";
  accelerator.load_state(dir / "ckpt");
  EXPECT_EQ(one_pass(*resumed), tail(saved_epoch, 4)) << "continues after the 4 batches consumed";
  EXPECT_EQ(one_pass(*resumed), next_epoch) << "then the next epoch as the uninterrupted run had it";
}

INSTANTIATE_TEST_SUITE_P(Workers, LoaderResume, ::testing::Values(0, 2));

// A loop that has had its last batch is over: the resumed run starts the next epoch whole (the
// user's own epoch count, steps / len(loader), agrees) instead of an empty pass.
TEST(LoaderState, SavedOnTheLastBatchResumesWithTheNextEpoch) {
  ScratchDir dir;
  acc::Accelerator accelerator(single_process());
  auto loader = accelerator.prepare_data_loader(Indices(10), torch::data::DataLoaderOptions(4));
  pass_saving_after(accelerator, *loader, loader->size(), dir / "ckpt");
  const auto next_epoch = one_pass(*loader);
  loader.reset();
  auto resumed = accelerator.prepare_data_loader(Indices(10), torch::data::DataLoaderOptions(4));
  accelerator.load_state(dir / "ckpt");
  EXPECT_EQ(one_pass(*resumed), next_epoch);
}

// A training loader and an evaluation loader nested inside it, saved in the middle of both:
// each resumes where it was (files sampler.bin and sampler_1.bin, in preparation order).
TEST(LoaderState, SeveralLoadersKeepTheirOwnPositions) {
  ScratchDir dir;
  acc::Accelerator accelerator(single_process());
  auto train = accelerator.prepare_data_loader(Indices(20), torch::data::DataLoaderOptions(4));
  auto eval = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      Indices(9), torch::data::DataLoaderOptions(2));
  Batches train_seen, eval_seen;
  for (auto& batch : *train) {
    train_seen.push_back(as_indices(batch));
    if (train_seen.size() == 2) eval_seen = pass_saving_after(accelerator, *eval, 3, dir / "ckpt");
  }
  const auto files = std::vector<bool>{fs::exists(dir / "ckpt/sampler.bin"), fs::exists(dir / "ckpt/sampler_1.bin"),
                                       fs::exists(dir / "ckpt/sampler_2.bin")};
  EXPECT_EQ(files, (std::vector<bool>{true, true, false}));
  train.reset();
  eval.reset();

  auto train_again = accelerator.prepare_data_loader(Indices(20), torch::data::DataLoaderOptions(4));
  auto eval_again = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      Indices(9), torch::data::DataLoaderOptions(2));
  accelerator.load_state(dir / "ckpt");
  EXPECT_EQ(one_pass(*eval_again), tail(eval_seen, 3));
  EXPECT_EQ(one_pass(*train_again), tail(train_seen, 2));
}

TEST(LoaderState, ErrorsNameTheFix) {
  ScratchDir dir;
  acc::Accelerator accelerator(single_process());
  accelerator.save_state(dir / "no_loaders");
  auto loader = accelerator.prepare_data_loader(Indices(10), torch::data::DataLoaderOptions(4));
  try {
    accelerator.load_state(dir / "no_loaders");
    FAIL() << "a checkpoint without the loader's file must not load";
  } catch (const acc::CheckpointError& error) {
    EXPECT_NE(std::string(error.what()).find("sampler.bin' for a prepared data loader"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("Prepare the extra loaders after load_state"), std::string::npos)
        << error.what();
  }

  // A checkpoint of two processes: one rank's batch count means nothing on one process.
  accelerator.save_state(dir / "ckpt");
  torch::serialize::OutputArchive archive;
  archive.write("seed", c10::IValue(int64_t{1}));
  archive.write("positions", torch::zeros({2, 2}, torch::kLong));
  archive.save_to(dir / "ckpt/sampler.bin");
  fs::remove(dir / "ckpt/checksums_0.txt");  // else the changed file is named as damaged, first
  try {
    accelerator.load_state(dir / "ckpt");
    FAIL() << "a position saved by another number of processes must not load";
  } catch (const acc::CheckpointError& error) {
    EXPECT_NE(std::string(error.what()).find("position of 2 processes but this run has 1"), std::string::npos)
        << error.what();
  }
}
