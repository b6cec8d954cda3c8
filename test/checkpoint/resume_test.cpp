// Crash safety (SIGKILL at many moments of a save) and exact resume on 1 and 2 processes, with
// the worker program checkpoint_worker.cpp.
#include <acc/safetensors.h>

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <random>

#include "spawn.h"
#include "test_util.h"

namespace fs = std::filesystem;
using acc::testing::ScratchDir;
using namespace std::chrono_literals;

namespace {
std::string worker() { return acc::testing::executable_dir() + "/acc_checkpoint_worker"; }
}  // namespace

// A child saves checkpoints in a loop and is killed with SIGKILL after a random delay, many
// times; after every kill the newest complete checkpoint must load and be internally consistent
// (weights and registered counter from the same save). Each run resumes the previous one.
TEST(CrashSafety, KillDuringSaveNeverLeavesAPickableBrokenCheckpoint) {
  ScratchDir project;
  std::mt19937 random(20240601);
  std::uniform_int_distribution<int> delay_ms(1200, 3500);  // startup is about 1 s
  int kills = 0, verified = 0, inside_save = 0;
  for (int round = 0; round < 10; ++round) {
    const auto run = acc::testing::spawn_ranks(worker(), {"save-loop", project.path()}, 1,
                                               std::chrono::milliseconds(delay_ms(random)));
    ASSERT_TRUE(run.timed_out) << run.describe();  // it only ends by being killed
    EXPECT_EQ(run.ranks[0].signal, SIGKILL);
    ++kills;
    if (!fs::exists(project / "checkpoints")) continue;  // killed before the first save
    for (const auto& entry : fs::directory_iterator(project / "checkpoints")) {
      const auto name = entry.path().filename().string();
      if (name.rfind(".checkpoint_", 0) == 0) ++inside_save;  // a temporary directory: mid-save
    }
    const auto check = acc::testing::spawn_ranks(worker(), {"verify", project.path()}, 1, 60s);
    ASSERT_TRUE(check.all_succeeded()) << "after kill " << kills << ":\n" << check.describe();
    ++verified;
  }
  EXPECT_GE(verified, 7) << "most kills should land after the first checkpoint";
  // The child does nothing but save, so kills land inside saves (the case under test).
  EXPECT_GE(inside_save, 3) << "kills inside a save: " << inside_save;
}

namespace {
void expect_identical_weights(const std::string& a, const std::string& b) {
  const auto left = acc::safetensors::load_file(a);
  const auto right = acc::safetensors::load_file(b);
  ASSERT_EQ(left.size(), right.size());
  for (size_t i = 0; i < left.size(); ++i) {
    EXPECT_EQ(left[i].first, right[i].first);
    EXPECT_TRUE(left[i].second.equal(right[i].second)) << "weights differ at " << left[i].first;
  }
}

void exact_resume(int ranks) {
  ScratchDir dir;
  const std::string k = "7", n = "14";
  const auto straight = acc::testing::spawn_ranks(
      worker(), {"train", dir / "straight_ckpt", k, n, dir / "straight.safetensors"}, ranks, 120s);
  ASSERT_TRUE(straight.all_succeeded()) << straight.describe();
  const auto killed = acc::testing::spawn_ranks(worker(), {"train-kill", dir / "killed_ckpt", k}, ranks, 120s);
  for (const auto& rank : killed.ranks) ASSERT_EQ(rank.signal, SIGKILL) << killed.describe();
  const auto resumed = acc::testing::spawn_ranks(
      worker(), {"resume", dir / "killed_ckpt", n, dir / "resumed.safetensors"}, ranks, 120s);
  ASSERT_TRUE(resumed.all_succeeded()) << resumed.describe();
  expect_identical_weights(dir / "straight.safetensors", dir / "resumed.safetensors");
  // The comparison can fail: the run stopped at K differs from the run continued to 2K.
  const auto at_k = acc::testing::spawn_ranks(
      worker(), {"resume", dir / "killed_ckpt", k, dir / "at_k.safetensors"}, ranks, 120s);
  ASSERT_TRUE(at_k.all_succeeded()) << at_k.describe();
  EXPECT_FALSE(acc::safetensors::load_file(dir / "at_k.safetensors")[0].second.equal(
      acc::safetensors::load_file(dir / "straight.safetensors")[0].second));
}
}  // namespace

TEST(ExactResume, OneProcessKilledAndResumedMatchesUninterruptedBitForBit) { exact_resume(1); }
TEST(ExactResume, TwoProcessesKilledAndResumedMatchUninterruptedBitForBit) { exact_resume(2); }
