// Multi-process data loading: each test starts 2 or 3 ranks of acc_data_worker on loopback
// under a hard deadline (spawn_ranks kills and reaps whatever outlives it).
#include <gtest/gtest.h>

#include "spawn.h"

namespace {

using acc::testing::spawn_ranks;
using acc::testing::SpawnResult;

SpawnResult run(const std::string& scenario, int ranks) {
  return spawn_ranks(acc::testing::executable_dir() + "/acc_data_worker", {scenario}, ranks,
                     std::chrono::seconds(120));
}

class DataRanks : public ::testing::TestWithParam<int> {};

TEST_P(DataRanks, EachRankLoadsExactlyItsShard) {
  auto result = run("shard", GetParam());
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST_P(DataRanks, ShuffledEpochsAreSharedPermutationsAndGatherCountsEachSampleOnce) {
  auto result = run("shuffle", GetParam());
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

TEST_P(DataRanks, DistributedAccuracyEqualsSingleProcessAccuracy) {
  auto result = run("evaluate", GetParam());
  ASSERT_TRUE(result.all_succeeded()) << result.describe();
  EXPECT_NE(result.ranks[0].output.find("accuracy "), std::string::npos);
}

TEST_P(DataRanks, EmptyAndTinyDatasetsNeitherHangNorDoubleCount) {
  auto result = run("small", GetParam());
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

INSTANTIATE_TEST_SUITE_P(MultiProcess, DataRanks, ::testing::Values(2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "Ranks"; });

TEST(DataMultiProcess, RanksWithDifferentSampleOrdersAreAnErrorOnEveryRank) {
  auto result = run("mismatch", 2);
  ASSERT_TRUE(result.all_succeeded()) << result.describe();
  for (const auto& rank : result.ranks) {
    EXPECT_NE(rank.output.find("drew different sample orders for epoch 0"), std::string::npos)
        << rank.output;
  }
}

}  // namespace
