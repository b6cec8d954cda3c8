// The failure report's first line names the rank to blame (issue 35, item 8): a rank found stopped, or
// the rank the failed ranks' acc errors name, before the rank that merely failed first; and how a
// stopped process is recognised. Units: the ranks are described, not run (launch_process_test.cpp and
// runtime/test/comm/stall_test.cpp run them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "blame.h"
#include "failure_report.h"
#include "stopped_process.h"

namespace acc::launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// libacc's errors as ProcessGroup::fail and absent_peers / describe_peers write them
// (runtime/src/comm/process_group.cpp, rank_positions.cpp).
std::string store_silent_error(int rank, int world) {
  return "acc: uncaught acc::DistributedError: acc: reduce(sum) failed on rank " + std::to_string(rank) + " of " +
         std::to_string(world) +
         " (timeout 4 s): Operation timed out!; rank 0, which serves the job's store, does not answer either: it is "
         "stopped (SIGSTOP, a debugger) or its machine is unreachable. Check the other ranks' output. The deadline "
         "is AcceleratorOptions().timeout(...).";
}

std::string not_reached_error(int rank, int world, const std::string& missing, const std::string& with_me) {
  return "acc: uncaught acc::DistributedError: acc: reduce(sum) failed on rank " + std::to_string(rank) + " of " +
         std::to_string(world) +
         " (timeout 4 s): Operation timed out!; this rank was in its 2nd collective "
         "(reduce(sum) of Float[1]): " +
         missing + " not reached it (busy outside it, stopped, or exited); " + with_me +
         " in it too. Check the other ranks' output. The deadline is AcceleratorOptions().timeout(...).";
}

TEST(Blame, TheStoreServersSilenceBlamesRankZero) {
  const auto accusation = accusation_in(store_silent_error(2, 3));
  ASSERT_TRUE(accusation);
  EXPECT_EQ(accusation->reporter, 2);
  EXPECT_THAT(accusation->accused, ElementsAre(0));
  EXPECT_THAT(accusation->reason, HasSubstr("serves the job's store and does not answer"));
}

TEST(Blame, RanksThatHaveNotReachedTheCollectiveAreBlamed) {
  auto one = accusation_in(not_reached_error(0, 3, "rank 1 has", "rank 2 is"));
  ASSERT_TRUE(one);
  EXPECT_EQ(one->reporter, 0);
  EXPECT_THAT(one->accused, ElementsAre(1));
  EXPECT_THAT(one->reason, HasSubstr("has not reached their collective"));
  auto two = accusation_in(not_reached_error(0, 8, "ranks 3, 5 have", "ranks 1, 2 are"));
  ASSERT_TRUE(two);
  EXPECT_THAT(two->accused, ElementsAre(3, 5));
}

TEST(Blame, LinesThatBlameNobodyAreNotAccusations) {
  // A stall report (not an error), an error about ranks in other collectives, a program's own line.
  EXPECT_FALSE(
      accusation_in("acc: rank 1 has waited 4 s in its 2nd collective (reduce(sum) of Float[1]): rank 0, "
                    "which serves the job's store, does not answer: it is stopped (SIGSTOP, a debugger)"));
  EXPECT_FALSE(
      accusation_in("acc: reduce(sum) failed on rank 0 of 3 (timeout 20 s): the ranks are not in the same "
                    "collective; this rank was in its 1st collective (reduce(sum)): rank 2 failed in its 1st "
                    "collective (gather (shape check)) instead: the ranks do not call the same collectives"));
  EXPECT_FALSE(accusation_in("epoch 3: loss 0.25"));
  EXPECT_FALSE(accusation_in("failed on rank"));
}

SupervisedRank ended_rank(int rank, int wait_status, double ended_s, std::vector<std::string> lines = {}) {
  SupervisedRank r;
  r.rank = rank;
  r.local_rank = rank;
  r.pid = 1000 + rank;
  r.started = Clock::time_point{};
  r.ended = r.started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ended_s));
  r.wait_status = wait_status;
  for (const auto& line : lines) r.history.add(line);
  return r;
}

constexpr int kExit1 = 1 << 8;  // a wait status: exited with code 1
constexpr int kKilledBySigkill = SIGKILL;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

TEST(FailureReport, AnOrdinaryFailureNamesTheRankThatFailedFirst) {
  std::vector<SupervisedRank> ranks;
  ranks.push_back(ended_rank(0, SIGTERM, 2.0));
  ranks.push_back(ended_rank(1, kExit1, 1.0, {"about to fail"}));
  ranks[0].signalled = true;
  const std::string report = failure_report(ranks, ranks[1], FailureReportContext{});
  EXPECT_EQ(report,
            "acc-launch: failed: rank 1 (local rank 1, pid 1001) exited with code 1 after about 1.0 s\n"
            "acc-launch: its last lines:\n  | about to fail\n");
}

TEST(FailureReport, AStoppedRankLeadsAndEveryRankThatFailedIsListed) {
  std::vector<SupervisedRank> ranks;
  ranks.push_back(ended_rank(0, kKilledBySigkill, 9.0));
  ranks.push_back(ended_rank(1, kExit1, 4.5, {store_silent_error(1, 3)}));
  ranks.push_back(ended_rank(2, kExit1, 4.6, {store_silent_error(2, 3)}));
  ranks[0].signalled = ranks[2].signalled = true;
  ranks[0].stopped = StoppedProcess{ranks[0].pid, false};
  const std::string report = failure_report(ranks, ranks[1], FailureReportContext{});
  EXPECT_THAT(first_line(report),
              StartsWith("acc-launch: failed: rank 0 (local rank 0, pid 1000) was stopped (SIGSTOP or a debugger) when "
                         "rank 1 failed: ranks 1, 2 failed waiting for it. A stopped rank holds up every collective"));
  EXPECT_THAT(report, HasSubstr("\nacc-launch: rank 1 (local rank 1, pid 1001) exited with code 1 after about 4.5 s\n"
                                "acc-launch: rank 1 raised acc::DistributedError: acc: reduce(sum) failed on rank 1"));
  EXPECT_THAT(report, HasSubstr("\nacc-launch: rank 2 (local rank 2, pid 1002) exited with code 1 after about 4.6 s\n"
                                "acc-launch: rank 2 raised acc::DistributedError: acc: reduce(sum) failed on rank 2"));
  EXPECT_THAT(report, HasSubstr("its last lines:"));
  // The stopped rank was killed by the launcher: not a failure of its own.
  EXPECT_THAT(report, Not(HasSubstr("rank 0 (local rank 0, pid 1000) was killed")));
}

TEST(FailureReport, AStoppedRankWhoseFailedPeersNameNobodyIsStillTheCulprit) {
  std::vector<SupervisedRank> ranks;
  ranks.push_back(ended_rank(0, kKilledBySigkill, 9.0));
  ranks.push_back(ended_rank(1, kExit1, 4.5, {"Traceback: connection reset"}));
  ranks[0].signalled = true;
  ranks[0].stopped = StoppedProcess{4242, true};  // a process of its group, held by a debugger
  EXPECT_THAT(first_line(failure_report(ranks, ranks[1], FailureReportContext{})),
              StartsWith("acc-launch: failed: rank 0 (local rank 0, pid 1000) whose process 4242 was stopped by a "
                         "debugger or tracer when rank 1 failed: rank 1 failed waiting for it."));
}

TEST(FailureReport, ARankOnAnotherMachineThatTheErrorsNameLeads) {
  // Machine 0 of two, 2 ranks each: ranks 0 and 1 both name rank 3.
  std::vector<SupervisedRank> ranks;
  ranks.push_back(ended_rank(0, kExit1, 4.5, {not_reached_error(0, 4, "rank 3 has", "ranks 1, 2 are")}));
  ranks.push_back(ended_rank(1, kExit1, 4.6, {not_reached_error(1, 4, "rank 3 has", "ranks 0, 2 are")}));
  FailureReportContext context;
  context.local_world_size = 2;
  const std::string report = failure_report(ranks, ranks[0], context);
  EXPECT_EQ(first_line(report),
            "acc-launch: failed: rank 3 (on machine 1; its acc-launch reports how it ended): ranks 0, 1 failed waiting "
            "for it; their errors say it has not reached their collective (busy outside it, stopped, or exited)");
  EXPECT_THAT(report, HasSubstr("\nacc-launch: rank 0 (local rank 0, pid 1000) exited with code 1"));
  EXPECT_THAT(report, HasSubstr("\nacc-launch: rank 1 (local rank 1, pid 1001) exited with code 1"));
}

TEST(FailureReport, ABusyRankOfThisMachineThatTheErrorsNameLeads) {
  std::vector<SupervisedRank> ranks;
  ranks.push_back(ended_rank(0, kExit1, 4.5, {not_reached_error(0, 3, "rank 2 has", "rank 1 is")}));
  ranks.push_back(ended_rank(1, SIGTERM, 4.7));
  ranks.push_back(ended_rank(2, SIGTERM, 4.7));
  ranks[1].signalled = ranks[2].signalled = true;
  EXPECT_THAT(first_line(failure_report(ranks, ranks[0], FailureReportContext{})),
              StartsWith("acc-launch: failed: rank 2 (local rank 2, pid 1002) was still running, outside their "
                         "collective, when rank 0 failed: rank 0 failed waiting for it;"));
}

TEST(FailureReport, ARankThatFailedFirstAndIsNamedKeepsTheOrdinaryReport) {
  // Rank 2 exited with an error; the others then name it as the rank that has not reached the collective.
  std::vector<SupervisedRank> ranks;
  ranks.push_back(ended_rank(0, SIGTERM, 4.5, {not_reached_error(0, 3, "rank 2 has", "rank 1 is")}));
  ranks.push_back(ended_rank(1, SIGTERM, 4.5));
  ranks.push_back(ended_rank(2, kExit1, 1.0, {"ValueError"}));
  ranks[0].signalled = ranks[1].signalled = true;
  EXPECT_THAT(failure_report(ranks, ranks[2], FailureReportContext{}),
              StartsWith("acc-launch: failed: rank 2 (local rank 2, pid 1002) exited with code 1 after about 1.0 s\n"
                         "acc-launch: its last lines:\n  | ValueError\n"));
}

// A child that stops itself (SIGSTOP), with a child of its own in its process group; both are killed at
// the end.
struct StoppedChild {
  pid_t pid = -1;
  explicit StoppedChild(bool stop_leader) {
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      if (::fork() == 0) {
        if (!stop_leader) ::raise(SIGSTOP);
        ::pause();
        ::_exit(0);
      }
      if (stop_leader) ::raise(SIGSTOP);
      ::pause();
      ::_exit(0);
    }
    ::setpgid(pid, pid);
  }
  ~StoppedChild() {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

std::optional<StoppedProcess> find_stopped_within(pid_t pid, double seconds) {
  const auto give_up =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (;;) {
    if (auto found = find_stopped(pid); found || Clock::now() >= give_up) return found;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

TEST(StoppedProcess, AStoppedRankIsFoundAndARunningOneIsNot) {
  StoppedChild stopped(true);
  const auto found = find_stopped_within(stopped.pid, 10);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->pid, stopped.pid);
  EXPECT_FALSE(found->traced);
  EXPECT_STREQ(describe_stop(*found), "stopped (SIGSTOP or a debugger)");
  ::kill(stopped.pid, SIGCONT);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(find_stopped(stopped.pid));
  EXPECT_FALSE(find_stopped(::getpid()));
}

TEST(StoppedProcess, AStoppedProcessOfTheRanksGroupIsFound) {
  // The rank is a wrapper (a shell script, say) and the program it started is the one stopped.
  StoppedChild wrapper(false);
  const auto found = find_stopped_within(wrapper.pid, 10);
  ASSERT_TRUE(found);
  EXPECT_NE(found->pid, wrapper.pid);
  EXPECT_EQ(::getpgid(found->pid), wrapper.pid);
}

}  // namespace
}  // namespace acc::launcher
