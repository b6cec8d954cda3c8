// The rendezvous on loopback: deadlines that hold (within 10 %) and name what is missing, a store that
// refuses another job's ranks, and a store that listens on loopback only. Each case starts real ranks of
// acc_rendezvous_worker under a hard deadline (spawn_ranks kills and reaps whatever outlives it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <regex>

#include "../support/spawn.h"

namespace {

using acc::testing::spawn_ranks;
using acc::testing::SpawnResult;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

std::string worker() { return acc::testing::executable_dir() + "/acc_rendezvous_worker"; }

// The time a rank reported for its failed rendezvous, or -1.
long failed_after_ms(const std::string& output) {
  std::smatch match;
  if (!std::regex_search(output, match, std::regex("RENDEZVOUS FAILED after ([0-9]+) ms"))) return -1;
  return std::stol(match[1]);
}

void expect_deadline_held(const SpawnResult& result, int timeout_ms) {
  ASSERT_FALSE(result.timed_out) << result.describe();
  for (const auto& rank : result.ranks) {
    EXPECT_EQ(rank.exit_code, 2) << result.describe();
    const long took = failed_after_ms(rank.output);
    EXPECT_GE(took, timeout_ms) << result.describe();
    EXPECT_LE(took, timeout_ms * 11 / 10) << "the deadline must hold within 10 %\n" << result.describe();
  }
}

class Deadline : public ::testing::TestWithParam<int> {};

TEST_P(Deadline, RankZeroMissingIsNamedWhenTheDeadlinePasses) {
  const int timeout_ms = GetParam();
  // Ranks 1 and 2 of 3; rank 0 never starts.
  auto result = spawn_ranks(worker(), {std::to_string(timeout_ms), "sum"}, 2, seconds(60), {{"WORLD_SIZE", "3"}}, 1);
  expect_deadline_held(result, timeout_ms);
  for (const auto& rank : result.ranks) {
    EXPECT_THAT(rank.output, HasSubstr("could not reach rank 0's store at 127.0.0.1:")) << rank.output;
    EXPECT_THAT(rank.output, HasSubstr("Rank 0 has not started or has exited")) << rank.output;
  }
}

TEST_P(Deadline, MissingRanksAreNamedWhenTheDeadlinePasses) {
  const int timeout_ms = GetParam();
  // Ranks 0 and 1 of 4; ranks 2 and 3 never start.
  auto result = spawn_ranks(worker(), {std::to_string(timeout_ms), "sum"}, 2, seconds(60), {{"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "4"}});
  expect_deadline_held(result, timeout_ms);
  for (const auto& rank : result.ranks) {
    EXPECT_THAT(rank.output, HasSubstr("ranks 2, 3 did not arrive (2 of 4 did)")) << rank.output;
    EXPECT_THAT(rank.output, Not(HasSubstr("port"))) << "a missing rank is not a port problem\n" << rank.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Rendezvous, Deadline, ::testing::Values(3000, 6000),
                         [](const auto& info) { return std::to_string(info.param / 1000) + "s"; });

TEST(Rendezvous, CompleteJobSucceeds) {
  auto result = spawn_ranks(worker(), {"20000", "sum"}, 3, seconds(60));
  ASSERT_TRUE(result.all_succeeded()) << result.describe();
}

TEST(Rendezvous, AnotherJobsRankIsRefusedAndTheJobRunsOn) {
  const int port = acc::testing::free_port();
  const std::map<std::string, std::string> job_a{{"MASTER_PORT", std::to_string(port)}, {"ACC_JOB_ID", "job-a"}};
  // Job A's two ranks stay in the job long enough for the intruder to knock.
  auto a = std::async(std::launch::async, [&] {
    return spawn_ranks(worker(), {"20000", "sum", "hold", "4000"}, 2, seconds(60), job_a);
  });
  // A rank 1 of job B, given job A's port.
  auto b = spawn_ranks(worker(), {"20000", "sum"}, 1, seconds(60),
                       {{"MASTER_PORT", std::to_string(port)}, {"ACC_JOB_ID", "job-b"}, {"WORLD_SIZE", "2"}}, 1);
  const SpawnResult job = a.get();
  EXPECT_TRUE(job.all_succeeded()) << "job A must be unaffected\n" << job.describe();
  ASSERT_EQ(b.ranks[0].exit_code, 2) << b.describe();
  EXPECT_THAT(b.ranks[0].output, HasSubstr("rank 1 of 2 (job 'job-b') reached the store at 127.0.0.1:" +
                                          std::to_string(port) + " of another job (job 'job-a')"));
  EXPECT_THAT(b.ranks[0].output, HasSubstr("Give each job its own port"));
}

const std::string kSecret = "0123456789abcdef0123456789abcdef";

TEST(Rendezvous, WithASecretTheGateAdmitsTheJobAndKeepsOthersOut) {
  auto result = spawn_ranks(worker(), {"20000", "gated"}, 3, seconds(60), {{"ACC_STORE_SECRET", kSecret}});
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
  EXPECT_THAT(result.ranks[0].output, HasSubstr("the gate kept out a client without the secret"));
  // Rank 0 says once what it refused.
  EXPECT_THAT(result.ranks[0].output, HasSubstr("refused a connection from 127.0.0.1:")) << result.ranks[0].output;
}

TEST(Rendezvous, AWrongSecretIsNamedAtOnce) {
  const int port = acc::testing::free_port();
  auto job = std::async(std::launch::async, [&] {
    return spawn_ranks(worker(), {"8000", "sum"}, 1, seconds(60),
                       {{"MASTER_PORT", std::to_string(port)}, {"ACC_STORE_SECRET", kSecret}, {"WORLD_SIZE", "2"},
                        {"LOCAL_WORLD_SIZE", "2"}});
  });
  auto wrong = spawn_ranks(worker(), {"8000", "sum"}, 1, seconds(60),
                           {{"MASTER_PORT", std::to_string(port)}, {"ACC_STORE_SECRET", kSecret + "x"},
                            {"WORLD_SIZE", "2"}}, 1);
  job.get();
  ASSERT_EQ(wrong.ranks[0].exit_code, 2) << wrong.describe();
  EXPECT_THAT(wrong.ranks[0].output, HasSubstr("refused this rank's ACC_STORE_SECRET"));
  EXPECT_LT(failed_after_ms(wrong.ranks[0].output), 6000) << "named, not timed out\n" << wrong.describe();
}

// NCCL's one GPU per rank, on made-up GPUs: every rank names the ranks that share one and the fix,
// although rank 0 takes the store down as soon as it has raised the error.
TEST(Rendezvous, RanksSharingAGpuUnderNcclAllRaiseTheSameError) {
  auto result = spawn_ranks(worker(), {"20000", "shared_gpu"}, 3, seconds(60));
  ASSERT_TRUE(result.all_succeeded()) << result.describe();
  for (const auto& rank : result.ranks) {
    EXPECT_THAT(rank.output, HasSubstr("SHARED: acc: NCCL needs a GPU of its own for each rank, and ranks 0 "
                                       "(cuda:0) and 2 (cuda:0) share GPU-0 on host 'node'. ")) << rank.output;
    EXPECT_THAT(rank.output, HasSubstr("AcceleratorOptions().backend(\"gloo\")")) << rank.output;
  }
}

TEST(Rendezvous, StoreListensOnLoopbackOnly) {
  auto result = spawn_ranks(worker(), {"20000", "loopback"}, 2, seconds(60));
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

}  // namespace
