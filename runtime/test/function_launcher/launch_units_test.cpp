// The pure parts of acc::launch (runtime/src/function_launcher): each rank's environment, the report a rank
// sends, and which failure is named first. No process is started.
#include <gtest/gtest.h>

#include <acc/errors.h>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <set>

#include "error_text.h"
#include "function_launcher/rank_environment.h"
#include "function_launcher/rank_report.h"
#include "function_launcher/supervision.h"

namespace {

using namespace acc::detail;
using std::chrono::milliseconds;

std::map<std::string, std::string> as_map(const RankEnvironment& environment) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : environment.set) out[name] = value;
  return out;
}

JobEnvironment job() {
  JobEnvironment job;
  job.world_size = 4;
  job.master_addr = "127.0.0.1";
  job.master_port = 41234;
  job.job_id = "0123456789abcdef";
  job.store_secret = "a-secret-of-the-job-0123456789abcdef";
  job.mixed_precision = acc::MixedPrecision::FP16;
  job.cpu = true;
  job.threads_per_rank = 3;
  job.extra = {{"ACCELERATE_USE_FSDP", "true"}};
  return job;
}

// The names are spelled out: they are torchrun's and Accelerate's, and must not drift.
TEST(LaunchRankEnvironment, HasAccLaunchsVariables) {
  auto rank2 = as_map(rank_environment(job(), 2, 7));
  EXPECT_EQ(rank2, (std::map<std::string, std::string>{{"RANK", "2"},
                                                       {"LOCAL_RANK", "2"},
                                                       {"WORLD_SIZE", "4"},
                                                       {"LOCAL_WORLD_SIZE", "4"},
                                                       {"GROUP_RANK", "0"},
                                                       {"MASTER_ADDR", "127.0.0.1"},
                                                       {"MASTER_PORT", "41234"},
                                                       {"TORCHELASTIC_RESTART_COUNT", "0"},
                                                       {"TORCHELASTIC_MAX_RESTARTS", "0"},
                                                       {"ACC_JOB_ID", "0123456789abcdef"},
                                                       {"ACC_STORE_SECRET", "a-secret-of-the-job-0123456789abcdef"},
                                                       {"ACCELERATE_MIXED_PRECISION", "fp16"},
                                                       {"ACCELERATE_USE_CPU", "True"},
                                                       {"OMP_NUM_THREADS", "3"},
                                                       {"ACCELERATE_USE_FSDP", "true"}}));
}

TEST(LaunchRankEnvironment, OnlyRankZeroGetsTheListeningSocket) {
  auto rank0 = rank_environment(job(), 0, 7);
  auto rank1 = rank_environment(job(), 1, 7);
  EXPECT_EQ(as_map(rank0)["ACC_STORE_LISTEN_FD"], "7");
  EXPECT_EQ(as_map(rank1).count("ACC_STORE_LISTEN_FD"), 0u);
  auto unsets = [](const RankEnvironment& e) { return std::set<std::string>(e.unset.begin(), e.unset.end()); };
  EXPECT_EQ(unsets(rank1), (std::set<std::string>{"ACC_STORE_LISTEN_FD", "TORCHELASTIC_RUN_ID",
                                                  "TORCHELASTIC_USE_AGENT_STORE"}));
  EXPECT_EQ(unsets(rank0), (std::set<std::string>{"TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE"}));
}

TEST(LaunchRankEnvironment, ExtraVariablesMayNotReplaceTheLaunchers) {
  EXPECT_NO_THROW(check_extra_environment({{"FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP"}, {"MY_FLAG", ""}}));
  for (const char* owned :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
        "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
        "TORCHELASTIC_USE_AGENT_STORE", "ACC_STORE_LISTEN_FD", "ACC_JOB_ID", "ACC_STORE_SECRET",
        "ACCELERATE_MIXED_PRECISION", "ACCELERATE_USE_CPU", "OMP_NUM_THREADS"}) {
    EXPECT_THROW(check_extra_environment({{owned, "1"}}), acc::ConfigError) << owned;
  }
  EXPECT_EQ(acc::testing::error_text<acc::ConfigError>([] {
              check_extra_environment({{"ACCELERATE_USE_CPU", "1"}});
            }),
            "acc::launch: LaunchOptions::env sets ACCELERATE_USE_CPU, which acc::launch sets for every rank itself "
            "(set LaunchOptions::cpu instead); remove it from env");
  EXPECT_EQ(acc::testing::error_text<acc::ConfigError>([] {
              check_extra_environment({{"A=B", "1"}});
            }),
            "acc::launch: LaunchOptions::env has the variable name 'A=B', which cannot be set (empty or with '='); "
            "fix the name");
}

TEST(LaunchRankEnvironment, JobIdsAreFreshHex) {
  const std::string a = new_job_id(), b = new_job_id();
  EXPECT_EQ(a.size(), 16u);
  EXPECT_TRUE(std::all_of(a.begin(), a.end(), [](char c) { return std::isxdigit(c) && !std::isupper(c); })) << a;
  EXPECT_NE(a, b);
}

TEST(LaunchRankReport, RoundTrips) {
  RankReport threw;
  threw.threw = true;
  threw.ended = SteadyClock::time_point(std::chrono::nanoseconds(123456789));
  threw.error = "line one\nline two";
  auto back = decode_report(encode_report(threw));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->threw);
  EXPECT_EQ(back->ended, threw.ended);
  EXPECT_EQ(back->error, "line one\nline two");

  RankReport returned;
  returned.ended = threw.ended;
  back = decode_report(encode_report(returned));
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->threw);
  EXPECT_EQ(back->error, "");
}

TEST(LaunchRankReport, LongErrorsAreCut) {
  RankReport report;
  report.threw = true;
  report.error = std::string(kMaxReportedError + 100, 'x');
  auto back = decode_report(encode_report(report));
  ASSERT_TRUE(back);
  EXPECT_LT(back->error.size(), kMaxReportedError + 64);
  EXPECT_NE(back->error.find("[... cut at 16384 bytes]"), std::string::npos);
}

TEST(LaunchRankReport, PartialOrForeignBytesAreNoReport) {
  for (const std::string bytes : {"", "T", "T 12", "X 12\n", "T abc\n", "R 12x\n"}) {
    EXPECT_FALSE(decode_report(bytes)) << "'" << bytes << "'";
  }
}

RankProcess ended(int rank, int wait_status, std::optional<RankReport> report, int reaped_ms) {
  RankProcess process;
  process.rank = rank;
  process.running = false;
  process.wait_status = wait_status;
  process.report = std::move(report);
  process.reaped = SteadyClock::time_point(milliseconds(reaped_ms));
  return process;
}

RankReport threw_at(int ms, const std::string& error) {
  RankReport report;
  report.threw = true;
  report.ended = SteadyClock::time_point(milliseconds(ms));
  report.error = error;
  return report;
}

constexpr int kExit1 = 1 << 8;  // waitpid's status for exit(1)
constexpr int kExit0 = 0;

TEST(LaunchFirstFailure, TheRanksOwnTimesDecideNotTheReapingOrder) {
  // Rank 1 threw first; rank 0's collective broke because of it. Both reaped in one wake-up.
  std::vector<RankProcess> ranks{ended(0, kExit1, threw_at(120, "Connection closed by peer"), 200),
                                 ended(1, kExit1, threw_at(100, "boom"), 200), ended(2, kExit0, RankReport{}, 150)};
  const RankProcess* first = first_failure(ranks);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->rank, 1);
  EXPECT_EQ(first->describe(), "threw \"boom\"");
}

TEST(LaunchFirstFailure, ExitsAndSignalsCountFromWhenTheyWereReaped) {
  std::vector<RankProcess> ranks{ended(0, kExit1, threw_at(300, "later"), 310),
                                 ended(1, 3 << 8, std::nullopt, 250),  // std::exit(3)
                                 ended(2, SIGKILL, std::nullopt, 280)};
  EXPECT_EQ(first_failure(ranks)->rank, 1);
  EXPECT_EQ(ranks[1].describe(), "exited with code 3");
  EXPECT_EQ(ranks[2].describe(), "was killed by signal 9 (SIGKILL)");
}

RankReport returned_at(int ms) {
  RankReport report;
  report.ended = SteadyClock::time_point(milliseconds(ms));
  return report;
}

TEST(LaunchFirstFailure, RanksThatReturnedBeforeItAreNamedEarliestFirst) {
  std::vector<RankProcess> ranks{
      ended(0, kExit0, returned_at(90), 95), ended(1, kExit1, threw_at(100, "Connection closed by peer"), 120),
      ended(2, kExit0, returned_at(50), 60), ended(3, kExit0, returned_at(130), 135),  // after it: not to blame
      ended(4, kExit0, std::nullopt, 70)};  // std::exit(0): fn did not return
  const auto leavers = early_leavers(ranks, ranks[1]);
  ASSERT_EQ(leavers.size(), 2u);
  EXPECT_EQ(leavers[0]->rank, 2);
  EXPECT_EQ(leavers[1]->rank, 0);
}

TEST(LaunchFirstFailure, SuccessesAndRunningRanksAreNoFailure) {
  std::vector<RankProcess> ranks{ended(0, kExit0, RankReport{}, 100)};
  RankProcess running;
  running.rank = 1;
  ranks.push_back(running);
  EXPECT_EQ(first_failure(ranks), nullptr);
}

TEST(LaunchFirstFailure, AStatusTakenBySomeoneElseFallsBackOnTheReport) {
  auto returned = ended(0, 0, RankReport{}, 100);
  returned.status_known = false;
  auto silent = ended(1, 0, std::nullopt, 100);
  silent.status_known = false;
  EXPECT_FALSE(returned.failed());
  EXPECT_TRUE(silent.failed());
  EXPECT_NE(silent.describe().find("collected by someone else"), std::string::npos);
}

}  // namespace
