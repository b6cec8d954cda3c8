// Multi-process tests: each starts 2 or 4 ranks of acc_mp_worker on loopback under a hard
// deadline (spawn_ranks kills and reaps whatever outlives it).
#include <gtest/gtest.h>

#include <filesystem>

#include "spawn.h"

namespace {

using acc::testing::spawn_ranks;
using acc::testing::SpawnResult;
using std::chrono::seconds;

std::string worker() { return acc::testing::executable_dir() + "/acc_mp_worker"; }

SpawnResult run(const std::vector<std::string>& args, int ranks, seconds deadline = seconds(120)) {
  return spawn_ranks(worker(), args, ranks, deadline);
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class Ranks : public ::testing::TestWithParam<int> {};

TEST_P(Ranks, DdpMatchesSingleProcessOnGlobalBatch) {
  auto result = run({"ddp_equivalence"}, GetParam());
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST_P(Ranks, DdpWithManySmallBucketsMatchesSingleProcess) {
  // A cap of 0.0001 MiB puts nearly every parameter in its own bucket.
  auto result = run({"ddp_equivalence", "0.0001"}, GetParam());
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST_P(Ranks, DdpWithAGradientReducedInPlaceMatchesSingleProcess) {
  // A 1024 x 1024 layer: its 4 MiB gradient is all-reduced where it lies, the rest in buckets.
  auto result = run({"ddp_equivalence", "25", "large"}, GetParam());
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST_P(Ranks, CollectivesAndProcessControl) {
  auto marker = std::filesystem::temp_directory_path() /
                ("acc-main-first-" + std::to_string(::getpid()) + "-" + std::to_string(GetParam()));
  std::filesystem::remove(marker);
  auto result = run({"collectives", marker.string()}, GetParam());
  std::filesystem::remove(marker);
  ASSERT_TRUE(result.all_succeeded()) << result.describe();
  int printed = 0;
  for (const auto& rank : result.ranks) printed += count(rank.output, "printed-by-print");
  EXPECT_EQ(printed, 1) << "print() must print on the local main process only\n" << result.describe();
  EXPECT_EQ(count(result.ranks[0].output, "printed-by-print 0"), 1);
}

INSTANTIATE_TEST_SUITE_P(MultiProcess, Ranks, ::testing::Values(2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "Ranks"; });

// 3 ranks: a world size that is not a power of two, where multiplying by 1/world and dividing by world
// round differently.
TEST(MultiProcess, AveragedGradientsRoundAsTorchDdp) {
  for (const std::string mode : {"", "view", "view_none"}) {
    auto result = run({"average_rounding", mode}, 3);
    EXPECT_TRUE(result.all_succeeded()) << "mode '" << mode << "'\n" << result.describe();
  }
}

TEST(MultiProcess, BuffersFollowRankZeroAfterBackward) {
  auto result = run({"buffers"}, 2);
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST(MultiProcess, BuffersStayLocalWithoutBroadcastBuffers) {
  auto result = run({"buffers", "off"}, 2);
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST(MultiProcess, NoSyncAccumulatesLocallyAndSyncsOnNextStep) {
  auto result = run({"no_sync"}, 2);
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST(MultiProcess, UnusedParametersAreAnErrorUnlessAllowed) {
  auto result = run({"unused"}, 2);
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST(MultiProcess, DifferentModelsAreNamedOnEveryRank) {
  auto result = run({"mismatch"}, 2);
  ASSERT_TRUE(result.all_succeeded()) << result.describe();
  for (const auto& rank : result.ranks) {
    EXPECT_NE(rank.output.find("'0.weight' [16, 8]"), std::string::npos) << rank.output;
    EXPECT_NE(rank.output.find("'0.weight' [17, 8]"), std::string::npos) << rank.output;
    EXPECT_NE(rank.output.find("rank 1"), std::string::npos) << rank.output;
  }
}

TEST(MultiProcess, DeadPeerBecomesAnErrorNotAHang) {
  auto result = run({"peer_failure"}, 2, seconds(60));
  ASSERT_FALSE(result.timed_out) << result.describe();
  EXPECT_EQ(result.ranks[1].exit_code, 3) << result.describe();
  EXPECT_EQ(result.ranks[0].exit_code, 0) << result.describe();
  EXPECT_NE(result.ranks[0].output.find("on rank 0 of 2"), std::string::npos) << result.describe();
  // The error names the rank to blame, not only the one that noticed.
  EXPECT_NE(result.ranks[0].output.find("rank 1 has not reached it (busy outside it, stopped, or exited)"),
            std::string::npos) << result.describe();
}

TEST(MultiProcess, StalledPeerTimesOutWithTheConfiguredDeadline) {
  auto result = run({"peer_failure", "stall"}, 2, seconds(60));
  ASSERT_FALSE(result.timed_out) << result.describe();
  EXPECT_EQ(result.ranks[0].exit_code, 0) << result.describe();
  EXPECT_NE(result.ranks[0].output.find("timeout 3 s"), std::string::npos) << result.describe();
  EXPECT_NE(result.ranks[0].output.find("rank 1 has not reached it"), std::string::npos) << result.describe();
}

TEST(MultiProcess, AccumulationEqualsOneGlobalStepAndSkipsCommunication) {
  auto result = run({"accumulation"}, 2);
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST(MultiProcess, SyncEachBatchCommunicatesEveryBatchAndStillEqualsOneGlobalStep) {
  auto result = run({"accumulation", "sync_each_batch"}, 2);
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST(MultiProcess, PlainSchedulerNeedsAccSchedulerWithSeveralProcesses) {
  auto result = run({"scheduler_rules"}, 2);
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
  EXPECT_EQ(count(result.ranks[0].output, "steps 2 times per optimizer step"), 1) << result.describe();
  EXPECT_EQ(count(result.ranks[1].output, "steps 2 times per optimizer step"), 0) << result.describe();
}

}  // namespace
