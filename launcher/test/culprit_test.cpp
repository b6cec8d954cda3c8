// acc-launch's failure report names the rank the others waited for first (issue 35, item 8): a rank of
// this machine that is stopped when another fails, or, on another machine, the rank the failed ranks'
// acc errors name. Before, the first line named the healthy rank that happened to fail first. fake_rank
// stands in for the ranks (runtime/test/comm/stall_test.cpp runs real acc ranks); loopback, hard timeouts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_process.h"

namespace acc::launcher::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> launch(std::vector<std::string> args) {
  args.insert(args.begin(), ACC_LAUNCH);
  return args;
}

Options clean() {
  Options options;
  options.timeout_s = 30;
  options.env["ACC_CONFIG_FILE"] = std::nullopt;
  options.env["XDG_CACHE_HOME"] = temp_dir("culprit-cache");
  for (const char* slurm : {"SLURM_STEP_ID", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_JOB_NODELIST"})
    options.env[slurm] = std::nullopt;
  return options;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

std::string first_report_line(const std::string& err) {
  const size_t at = err.find("acc-launch: failed: ");
  if (at == std::string::npos) return "";
  return err.substr(at, err.find('\n', at) - at);
}

// What libacc says when a collective fails while rank 0, which serves the store, is stopped
// (runtime/src/comm/process_group.cpp).
std::string store_silent_error(int rank) {
  return "acc: uncaught acc::DistributedError: acc: reduce(sum) failed on rank " + std::to_string(rank) +
         " of 3 (timeout 4 s): Operation timed out!; rank 0, which serves the job's store, does not answer either: "
         "it is stopped (SIGSTOP, a debugger) or its machine is unreachable. Check the other ranks' output.";
}

TEST(Culprit, AStoppedRankIsNamedFirstNotThePeerThatFailedWaitingForIt) {
  // Rank 0 stops itself; rank 1, waiting for it, fails 1 s later; rank 2 waits on (killed by acc-launch).
  const Finished f = run(
      launch({"-n", "3", "--main_process_port", "0", "--grace_period", "1", FAKE_RANK, "@0:kill",
              std::to_string(SIGSTOP), "sleep", "1", "@1:err", store_silent_error(1), "@1:exit", "1", "sleep", "30"}),
      clean());
  EXPECT_EQ(f.exit_code, 1) << f.err;
  std::cout << "headline: " << first_report_line(f.err) << "\n";
  EXPECT_THAT(first_report_line(f.err),
              ContainsRegex("^acc-launch: failed: rank 0 \\(local rank 0, pid [0-9]+\\) was stopped \\(SIGSTOP or a "
                            "debugger\\) when rank 1 failed: rank 1 failed waiting for it\\. A stopped rank holds up "
                            "every collective of the job: find what stopped it"))
      << f.err;
  // Said as it happens too, and the rank that failed is still reported with its error and last lines.
  EXPECT_THAT(f.err, ContainsRegex("acc-launch: rank 1 exited with code 1; rank 0 \\(local rank 0, pid [0-9]+\\) is "
                                   "stopped \\(SIGSTOP or a debugger\\); stopping the other ranks"));
  EXPECT_THAT(f.err,
              ContainsRegex("\nacc-launch: rank 1 \\(local rank 1, pid [0-9]+\\) exited with code 1 after about"));
  EXPECT_THAT(f.err, HasSubstr("acc-launch: rank 1 raised acc::DistributedError: acc: reduce(sum) failed on rank 1"));
  EXPECT_THAT(f.err, HasSubstr("its last lines:\n  | acc: uncaught acc::DistributedError"));
  EXPECT_THAT(f.err, Not(HasSubstr("rank 2 (local rank 2")));  // stopped by acc-launch: not a failure
}

TEST(Culprit, AnOrdinaryFailureStillNamesTheRankThatFailedFirst) {
  const Finished f = run(
      launch({"-n", "3", "--main_process_port", "0", "--grace_period", "1", FAKE_RANK, "@2:exit", "4", "sleep", "30"}),
      clean());
  EXPECT_EQ(f.exit_code, 4);
  EXPECT_THAT(first_report_line(f.err),
              ContainsRegex("^acc-launch: failed: rank 2 \\(local rank 2, pid [0-9]+\\) exited "
                            "with code 4 after about [0-9.]+ s$"));
  EXPECT_THAT(f.err, Not(HasSubstr("stopped (")));
}

TEST(Culprit, ARankStoppedOnAnotherMachineIsNamedOnBoth) {
  // Two machines of two ranks on loopback; rank 3 (machine 1) stops itself after the rendezvous. Machine
  // 0's ranks fail naming it as libacc does; machine 0's acc-launch names rank 3 first, and machine 1's,
  // stopping its ranks for machine 0, says that rank 3 is stopped.
  const std::vector<std::string> common = {
      "--num_processes",   "4",         "--num_machines",      "2",
      "--main_process_ip", "127.0.0.1", "--main_process_port", std::to_string(free_port()),
      "--grace_period",    "1"};
  auto error_of = [](int rank) {
    return "acc: uncaught acc::DistributedError: acc: reduce(sum) failed on rank " + std::to_string(rank) +
           " of 4 (timeout 4 s): Operation timed out!; this rank was in its 2nd collective (reduce(sum) of Float[1]): "
           "rank 3 has not reached it (busy outside it, stopped, or exited); ranks " +
           (rank == 0 ? "1" : "0") + ", 2 are in it too. Check the other ranks' output.";
  };
  const std::vector<std::string> program = {FAKE_RANK, "rendezvous", "@3:kill", std::to_string(SIGSTOP),
                                            "sleep",   "1",          "@0:err",  error_of(0),
                                            "@1:err",  error_of(1),  "@0:exit", "1",
                                            "@1:exit", "1",          "sleep",   "30"};
  std::vector<std::string> m0 = common, m1 = common;
  m0.insert(m0.end(), {"--machine_rank", "0"});
  m1.insert(m1.end(), {"--machine_rank", "1"});
  m0.insert(m0.end(), program.begin(), program.end());
  m1.insert(m1.end(), program.begin(), program.end());
  Process first(launch(m0), clean());
  Process second(launch(m1), clean());
  const Finished a = first.wait();
  const Finished b = second.wait();
  EXPECT_EQ(a.exit_code, 1) << a.err;
  std::cout << "machine 0's headline: " << first_report_line(a.err) << "\n";
  EXPECT_THAT(first_report_line(a.err),
              ContainsRegex("^acc-launch: failed: rank 3 \\(on machine 1; its acc-launch reports how it ended\\): "
                            "(ranks 0, 1|rank [01]) failed waiting for it; their errors say it has not reached their "
                            "collective"))
      << a.err;
  EXPECT_THAT(b.err, ContainsRegex("stopping this machine's ranks\\. On this machine rank 3 \\(local rank 1, pid "
                                   "[0-9]+\\) is stopped \\(SIGSTOP or a debugger\\): the other machines' ranks most "
                                   "likely failed waiting for it"))
      << b.err;
}

}  // namespace
}  // namespace acc::launcher::testing
