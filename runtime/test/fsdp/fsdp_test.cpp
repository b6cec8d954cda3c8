// FSDP multi-process tests: each starts 2 or 4 ranks of acc_fsdp_worker on loopback under a hard
// deadline (spawn_ranks kills and reaps whatever outlives it).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <vector>
#include <ostream>
#include <string>
#include <tuple>
#include <unistd.h>

#include "spawn.h"

namespace {

using acc::testing::spawn_ranks;
using std::chrono::seconds;

std::string worker() { return acc::testing::executable_dir() + "/acc_fsdp_worker"; }

struct Case {
  std::string strategy;
  int ranks;
  int local_world_size;  // fakes ranks / local_world_size machines
};

// Readable in test output (gtest would print the bytes).
void PrintTo(const Case& c, std::ostream* out) {
  *out << c.strategy << " on " << c.ranks << " ranks, " << c.local_world_size << " per machine";
}

class Equivalence : public ::testing::TestWithParam<Case> {};

// 10 Adam steps (also with gradient accumulation and with clip_grad_norm_) equal DDP and one
// process on the global batch; gradient and optimizer-state bytes are 1/shards of DDP's.
TEST_P(Equivalence, AdamMatchesDdpAndOneProcess) {
  const auto& c = GetParam();
  auto result = spawn_ranks(worker(), {"equivalence", c.strategy}, c.ranks, seconds(240),
                            {{"ACC_TEST_LOCAL_WORLD_SIZE", std::to_string(c.local_world_size)}});
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

INSTANTIATE_TEST_SUITE_P(
    Fsdp, Equivalence,
    ::testing::Values(Case{"NO_SHARD", 2, 2}, Case{"NO_SHARD", 4, 4}, Case{"SHARD_GRAD_OP", 2, 2},
                      Case{"SHARD_GRAD_OP", 4, 4}, Case{"HYBRID_SHARD_ZERO2", 2, 1},
                      Case{"HYBRID_SHARD_ZERO2", 4, 2}),
    [](const auto& info) {
      return info.param.strategy + "_" + std::to_string(info.param.ranks) + "Ranks_" +
             std::to_string(info.param.ranks / info.param.local_world_size) + "Machines";
    });

class FullShard : public ::testing::TestWithParam<Case> {
 protected:
  void run(const std::string& scenario) {
    const auto& c = GetParam();
    auto result = spawn_ranks(acc::testing::executable_dir() + "/acc_fsdp_full_shard_worker",
                              {scenario, c.strategy}, c.ranks, seconds(280),
                              {{"ACC_TEST_LOCAL_WORLD_SIZE", std::to_string(c.local_world_size)}});
    EXPECT_TRUE(result.all_succeeded()) << result.describe();
  }
};

// A transformer-like model (4 blocks with the seam line, untied and tied head, a block called
// twice, eval under NoGradGuard, accumulation + clipping, bf16): 10 AdamW steps equal DDP and one
// process; between steps no full parameter stays and the shards hold 1/N; while a block runs at
// most the root and that block are whole.
TEST_P(FullShard, TransformerMatchesDdpAndOneProcess) { run("transformer"); }
// A Sequential's children are units with no line in user code (SIZE_BASED_WRAP).
TEST_P(FullShard, SequentialChildrenNeedNoSeam) { run("sequential"); }

INSTANTIATE_TEST_SUITE_P(
    Fsdp, FullShard,
    ::testing::Values(Case{"FULL_SHARD", 2, 2}, Case{"FULL_SHARD", 4, 4}, Case{"HYBRID_SHARD", 4, 2}),
    [](const auto& info) {
      return info.param.strategy + "_" + std::to_string(info.param.ranks) + "Ranks_" +
             std::to_string(info.param.ranks / info.param.local_world_size) + "Machines";
    });

TEST(Fsdp, ReleasedUnitUsedOutsideItsSeamIsAnErrorNotGarbage) {
  auto result = spawn_ranks(acc::testing::executable_dir() + "/acc_fsdp_full_shard_worker", {"unseamed_use"}, 2,
                            seconds(120));
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

// Units whose forward never ran the seam stay whole: named once after the first step, by type, with
// the fix (the main process prints it); require_unit_seams(true) makes it an error on every rank.
TEST(Fsdp, UnitsThatNeverRanTheSeamAreNamedAfterTheFirstStep) {
  auto result = spawn_ranks(acc::testing::executable_dir() + "/acc_fsdp_full_shard_worker",
                            {"unseamed_units", "warned"}, 2, seconds(120));
  ASSERT_TRUE(result.all_succeeded()) << result.describe();
  const std::string& main = result.ranks[0].output;
  const std::string warning =
      "acc: warning: FSDP FULL_SHARD: 3 units of type (anonymous namespace)::PlainBlockImpl (block0, block1, block2) "
      "did not run the "
      "forward seam in the first training step";
  EXPECT_NE(main.find(warning), std::string::npos) << result.describe();
  EXPECT_EQ(main.find(warning), main.rfind(warning)) << "warned more than once\n" << result.describe();
  EXPECT_NE(main.find("`acc-migrate --fsdp-units=PlainBlock`"), std::string::npos) << result.describe();
  EXPECT_NE(main.find("acc::ForwardHooksGuard forward_hooks(*this);` (<acc/hooks.h>) the first line of "
                      "PlainBlockImpl::forward"), std::string::npos) << result.describe();
  EXPECT_EQ(result.ranks[1].output.find("did not run the forward seam"), std::string::npos) << result.describe();
}

TEST(Fsdp, RequireUnitSeamsMakesUnitsThatNeverRanTheSeamAnErrorOnEveryRank) {
  auto result = spawn_ranks(acc::testing::executable_dir() + "/acc_fsdp_full_shard_worker",
                            {"unseamed_units", "required"}, 2, seconds(120));
  ASSERT_TRUE(result.all_succeeded()) << result.describe();
  for (const auto& rank : result.ranks) {
    EXPECT_NE(rank.output.find("RAISED in step 1: acc: FSDP FULL_SHARD: 3 units of type (anonymous namespace)::PlainBlockImpl"),
              std::string::npos) << result.describe();
    EXPECT_NE(rank.output.find("require_unit_seams(true) was given"), std::string::npos) << result.describe();
  }
}

// FSDP_CPU_RAM_EFFICIENT_LOADING: ranks that built the model empty never hold it whole (peak RSS
// from building to prepare, 4 ranks), get rank 0's buffers, and train.
TEST(Fsdp, CpuRamEfficientLoadingKeepsOtherRanksUnderTheModelSize) {
  auto result = spawn_ranks(acc::testing::executable_dir() + "/acc_fsdp_full_shard_worker", {"ram_efficient_peak"},
                            4, seconds(180));
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

// A model built empty where nothing fills it: a ConfigError on every rank, none left waiting.
TEST(Fsdp, ModelBuiltEmptyWhereNothingFillsItIsRefusedOnEveryRank) {
  auto result = spawn_ranks(acc::testing::executable_dir() + "/acc_fsdp_full_shard_worker", {"empty_weights_errors"},
                            2, seconds(120));
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

// FULL_SHARD checkpoints: SHARDED saved on 4 ranks resumes on 2 (resharded), FULL saved on 2 resumes
// on 2 (random states are per rank, so a FULL checkpoint resumes on its own number of ranks); each
// continues as the uninterrupted run.
TEST(Fsdp, FullShardCheckpointsContinueAsTheUninterruptedRun) {
  const std::vector<std::tuple<std::string, int, int>> cases{{"SHARDED_STATE_DICT", 4, 2}, {"FULL_STATE_DICT", 2, 2}};
  for (const auto& [type, saved_on, resumed_on] : cases) {
    const auto directory = std::filesystem::temp_directory_path() /
                           ("acc-fsdp-full-shard-" + std::to_string(::getpid()) + "-" + type);
    std::filesystem::remove_all(directory);
    std::filesystem::create_directories(directory);
    const auto worker = acc::testing::executable_dir() + "/acc_fsdp_full_shard_worker";
    auto saved = spawn_ranks(worker, {"checkpoint_save", type, directory.string()}, saved_on, seconds(180));
    EXPECT_TRUE(saved.all_succeeded()) << type << "\n" << saved.describe();
    if (saved.all_succeeded()) {
      auto resumed = spawn_ranks(worker, {"checkpoint_resume", type, directory.string()}, resumed_on, seconds(180));
      EXPECT_TRUE(resumed.all_succeeded()) << type << "\n" << resumed.describe();
    }
    std::filesystem::remove_all(directory);
  }
}

TEST(Fsdp, RejectsWhatItCannotShardAndSavesFullModel) {
  const auto directory = std::filesystem::temp_directory_path() /
                         ("acc-fsdp-save-" + std::to_string(::getpid()));
  auto result = spawn_ranks(worker(), {"rejections_and_save_model", directory.string()}, 2, seconds(120));
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

// A fresh directory per test, removed at the end (std::filesystem::remove_all is safe here: this
// program does not link libtorch).
class FsdpCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("acc-fsdp-ckpt-" + std::to_string(::getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  void run(const std::vector<std::string>& args, int ranks, int local_world_size = 0,
           std::map<std::string, std::string> env = {}) {
    if (local_world_size > 0) env["ACC_TEST_LOCAL_WORLD_SIZE"] = std::to_string(local_world_size);
    auto result = spawn_ranks(worker(), args, ranks, seconds(240), env);
    EXPECT_TRUE(result.all_succeeded()) << result.describe();
  }
  acc::testing::RankResult merge(const std::vector<std::string>& args) {
    auto result = spawn_ranks(acc::testing::executable_dir() + "/acc-merge-weights", args, 1, seconds(60));
    return result.ranks.at(0);
  }
  std::string dir() const { return directory_.string(); }

 private:
  std::filesystem::path directory_;
};

// FULL_STATE_DICT writes DDP's tensors bit for bit; each loads the other's files.
TEST_F(FsdpCheckpoint, FullStateDictEqualsDdpFiles) { run({"full_against_ddp", dir()}, 2); }

// SGD (Nesterov), AdamW (amsgrad), Adagrad (state from construction) and RMSprop (centered,
// momentum) shard and save like Adam.
TEST_F(FsdpCheckpoint, EveryElementwiseOptimizerMatchesDdp) { run({"every_optimizer", dir()}, 2); }

// offload_params' copies (master shards and gradient shards apart from the model), forced on CPU.
TEST_F(FsdpCheckpoint, OffloadTrainsAndResumesAsWithout) {
  run({"offload", dir()}, 2);
}

// fp16 loss scaling over shards: an overflow one rank sees makes every rank skip the step.
TEST_F(FsdpCheckpoint, Fp16OverflowInOneShardSkipsTheStepEverywhere) {
  run({"fp16_overflow"}, 2);
}

// SHARDED_STATE_DICT saved by 4 ranks resumes on 2 and on 1 (resharding on load), and
// acc-merge-weights turns the shards into the whole weights save_model wrote at the same step.
TEST_F(FsdpCheckpoint, ShardedOnFourRanksResumesOnTwoAndOneAndMerges) {
  run({"sharded_save", dir(), "SHARD_GRAD_OP"}, 4);
  run({"sharded_resume", dir(), "SHARD_GRAD_OP"}, 2);
  run({"sharded_resume", dir(), "SHARD_GRAD_OP"}, 1);
  const auto merged = merge({dir() + "/checkpoint", dir() + "/merged"});
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  EXPECT_NE(merged.output.find("merged/model.safetensors"), std::string::npos) << merged.output;
  run({"same_tensors", dir() + "/merged/model.safetensors", dir() + "/whole/model.safetensors"}, 1);
}

// HYBRID_SHARD_ZERO2 on 2 machines of 2 writes 2 shards (one machine's); 3 processes reshard them.
TEST_F(FsdpCheckpoint, HybridShardedResumesOnThreeRanks) {
  run({"sharded_save", dir(), "HYBRID_SHARD_ZERO2"}, 4, 2);
  run({"sharded_resume", dir(), "SHARD_GRAD_OP"}, 3);
}

// FSDP's flat collectives on CPU are acc's send/recv rings (comm/ring_collectives.h).
class Rings : public ::testing::TestWithParam<int> {};

std::string collectives_worker() { return acc::testing::executable_dir() + "/acc_fsdp_collectives_worker"; }

// Reduce-scatter and all-gather in 4 dtypes and 5 sizes (empty too; the largest spans several of the
// ring's segments), all launched before any is
// waited for, equal Gloo's all-reduce and every rank's chunks exactly (integer data); random
// floats to 1e-5.
TEST_P(Rings, AgreeWithGloo) {
  auto result = spawn_ranks(collectives_worker(), {"agree"}, GetParam(), seconds(120));
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

INSTANTIATE_TEST_SUITE_P(Fsdp, Rings, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "Ranks"; });

// `scenario` of the collectives worker on 2 ranks, rank 1 exiting with 3 (dead) or sleeping past
// the 3 s timeout (stalled): rank 0 exits 0 only after DistributedError, whose text holds `message`.
void expect_peer_failure_reported(const std::string& scenario, bool stall, const std::string& message) {
  std::vector<std::string> args{scenario};
  if (stall) args.push_back("stall");
  auto result = spawn_ranks(collectives_worker(), args, 2, seconds(60));
  ASSERT_FALSE(result.timed_out) << result.describe();
  if (!stall) EXPECT_EQ(result.ranks[1].exit_code, 3) << result.describe();
  EXPECT_EQ(result.ranks[0].exit_code, 0) << result.describe();
  EXPECT_NE(result.ranks[0].output.find(message), std::string::npos) << result.describe();
}

TEST(Rings, DeadPeerFailsTheRingAndTheNextOneWithinSeconds) {
  expect_peer_failure_reported("ring_peer_failure", false, "ring after the peer left failed on rank 0 of 2");
}

TEST(Rings, StalledPeerTimesOutWithTheConfiguredDeadline) {
  expect_peer_failure_reported("ring_peer_failure", true, "timeout 3 s");
}

TEST(Rings, DestroyingTheGroupAbortsARingInFlight) {
  auto result = spawn_ranks(collectives_worker(), {"shutdown_with_ring_in_flight"}, 2, seconds(60));
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST(Fsdp, DeadPeerBecomesAnErrorNotAHang) {
  expect_peer_failure_reported("training_peer_failure", false, "on rank 0 of 2");
}

TEST(Fsdp, StalledPeerTimesOutWithTheConfiguredDeadline) {
  expect_peer_failure_reported("training_peer_failure", true, "timeout 3 s");
}

TEST(MergeWeights, UsageHelpAndErrors) {
  const auto tool = acc::testing::executable_dir() + "/acc-merge-weights";
  auto one = [&](const std::vector<std::string>& args) { return spawn_ranks(tool, args, 1, seconds(60)).ranks.at(0); };
  const auto help = one({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("usage: acc-merge-weights"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("SHARDED_STATE_DICT"), std::string::npos) << help.output;
  const auto missing = one({});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("expected CHECKPOINT_DIR and OUTPUT_DIR"), std::string::npos) << missing.output;
  const auto unknown = one({"--zip", "a", "b"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("unrecognized argument: --zip"), std::string::npos) << unknown.output;
  const auto empty = std::filesystem::temp_directory_path() / ("acc-merge-empty-" + std::to_string(::getpid()));
  std::filesystem::create_directories(empty);
  const auto not_sharded = one({empty.string(), (empty / "out").string()});
  std::filesystem::remove_all(empty);
  EXPECT_EQ(not_sharded.exit_code, 1);
  EXPECT_NE(not_sharded.output.find("not a checkpoint saved with FSDP SHARDED_STATE_DICT"), std::string::npos)
      << not_sharded.output;
  EXPECT_FALSE(std::filesystem::exists(empty / "out"));
}

}  // namespace
