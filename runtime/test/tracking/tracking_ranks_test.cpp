// Accelerator's trackers and progress bar on 1 and 2 processes on loopback: the main process
// writes every file and draws the bar; the other ranks create nothing and print no bar.
#include <gtest/gtest.h>

#include <filesystem>

#include "spawn.h"
#include "tracking_util.h"

namespace {

class TrackingRanks : public ::testing::TestWithParam<int> {};

TEST_P(TrackingRanks, OnlyTheMainProcessWritesAndDraws) {
  acc::testing::ScratchDir dir;
  const auto result =
      acc::testing::spawn_ranks(acc::testing::executable_dir() + "/acc_tracking_worker",
                                {dir.path()}, GetParam(), std::chrono::seconds(90));
  ASSERT_TRUE(result.all_succeeded()) << result.describe();
  const std::string run = dir.path() + "/rank0/proj";
  EXPECT_EQ(acc::testing::read_back("jsonl", run + "/metrics.jsonl"),
            "{\"loss\": 1.0, \"step\": 0}\n{\"loss\": 0.5, \"step\": 1}\n"
            "{\"loss\": 0.3333333333333333, \"step\": 2}\n{\"loss\": 0.25, \"step\": 3}\n"
            "{\"loss\": 0.2, \"step\": 4}\n");
  EXPECT_EQ(acc::testing::read_file(run + "/config.json"),
            "{\"lr\": 0.1, \"world\": " + std::to_string(GetParam()) + "}\n");
  std::string event_file;
  for (const auto& name : acc::testing::files_in(run)) {
    if (name.find("tfevents") != std::string::npos) event_file = run + "/" + name;
  }
  const std::string events = acc::testing::read_back("events", event_file);
  EXPECT_NE(events.find("scalar loss step=4 "), std::string::npos) << events;
  EXPECT_NE(events.find("scalar direct step=5 "), std::string::npos) << events;
  EXPECT_NE(result.ranks[0].output.find("train: 100% 5/5 ["), std::string::npos)
      << result.describe();
  for (int rank = 1; rank < GetParam(); ++rank) {
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/rank" + std::to_string(rank)))
        << "rank " << rank << " created files";
    EXPECT_EQ(result.ranks[rank].output, "rank " + std::to_string(rank) + " done\n");
  }
}

INSTANTIATE_TEST_SUITE_P(Processes, TrackingRanks, ::testing::Values(1, 2));

}  // namespace
