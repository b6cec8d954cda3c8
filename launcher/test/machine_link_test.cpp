// The heartbeat between the launchers of a multi-machine job (machine_link.h), both ends in this process
// on loopback: who is lost, when, and in which words; who is not (a goodbye, a stranger's connection).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "errors.h"
#include "machine_link.h"

namespace acc::launcher {
namespace {

using ::testing::HasSubstr;
using Clock = MachineLink::Clock;

LaunchPlan machine(int rank, int port) {
  LaunchPlan plan;
  plan.num_machines = 2;
  plan.machine_rank = rank;
  plan.master_addr = "127.0.0.1";
  plan.master_port = port - 1;  // the agent port is the next one
  return plan;
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// Runs both ends for `seconds`, or until `done` holds.
template <typename Done>
void pump(std::vector<MachineLink*> links, double seconds, Done done) {
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < end && !done()) {
    std::vector<pollfd> fds;
    for (auto* link : links) link->add_poll_fds(fds);
    ::poll(fds.data(), fds.size(), 20);
    for (auto* link : links) link->service(fds, Clock::now());
  }
}

TEST(MachineLink, MachineZeroTellsItsAttemptAndLosesAKilledMachine) {
  const int port = free_port();
  MachineLink leader(machine(0, port), 1.0);
  leader.set_attempt(3);
  auto follower = std::make_unique<MachineLink>(machine(1, port), 1.0);
  pump({&leader, follower.get()}, 5, [&] { return follower->leader_attempt().has_value(); });
  ASSERT_EQ(follower->leader_attempt(), 3);
  EXPECT_EQ(follower->connections(), 1);
  follower.reset();  // as when its acc-launch is killed: the connection closes without a goodbye
  pump({&leader}, 5, [&] { return leader.lost().has_value(); });
  ASSERT_TRUE(leader.lost().has_value());
  EXPECT_THAT(*leader.lost(), HasSubstr("machine 1 (127.0.0.1) closed the connection without ending its ranks"));
  leader.forget_losses();
  EXPECT_FALSE(leader.lost().has_value());
}

TEST(MachineLink, SilenceBeyondTheTimeoutIsALoss) {
  const int port = free_port();
  MachineLink leader(machine(0, port), 0.5);
  MachineLink follower(machine(1, port), 0.5);
  pump({&leader, &follower}, 5, [&] { return follower.leader_attempt().has_value(); });
  ASSERT_TRUE(follower.leader_attempt().has_value());
  // Only the follower runs: machine 0 stays silent (a frozen machine, or a cut link).
  const auto start = Clock::now();
  pump({&follower}, 5, [&] { return follower.lost().has_value(); });
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_TRUE(follower.lost().has_value());
  EXPECT_THAT(*follower.lost(), HasSubstr("machine 0 (127.0.0.1) has not answered for"));
  EXPECT_GE(took, 0.4);
  EXPECT_LT(took, 2.0);
  EXPECT_FALSE(follower.leader_attempt().has_value());  // a new connection must tell it again
}

TEST(MachineLink, GoodbyeAndStrangersAreNoLoss) {
  const int port = free_port();
  MachineLink leader(machine(0, port), 0.5);
  {
    MachineLink follower(machine(1, port), 0.5);
    pump({&leader, &follower}, 5, [&] { return follower.leader_attempt().has_value(); });
    follower.say_goodbye();
    pump({&leader, &follower}, 0.3, [] { return false; });
  }
  // A connection that never says hello (a port scan) closes again.
  const int stranger = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(::connect(stranger, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  pump({&leader}, 0.3, [] { return false; });
  ::close(stranger);
  pump({&leader}, 1.5, [&] { return leader.lost().has_value(); });
  EXPECT_FALSE(leader.lost().has_value()) << *leader.lost();
}

sockaddr_in loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  return address;
}

// What a machine met at the end of a job: machine 0's launcher, exiting, closed its connection after its
// goodbye; the machine (its ranks still running) connected again, and the kernel accepted that connection
// into machine 0's backlog just before the listener closed and reset it. A reset before machine 0 said a
// word is a refused connection, tried again; it once stopped the machine's ranks as a lost machine 0.
TEST(MachineLink, AConnectionResetBeforeMachineZeroSpeaksIsNoLoss) {
  const int port = free_port();
  const int exiting = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);  // machine 0's listener, exiting
  const int one = 1;
  ::setsockopt(exiting, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in address = loopback(port);
  ASSERT_EQ(::bind(exiting, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(exiting, 4), 0);
  MachineLink follower(machine(1, port), 5.0);
  int accepted = -1;
  pump({&follower}, 5, [&] { return (accepted = ::accept4(exiting, nullptr, nullptr, SOCK_NONBLOCK)) >= 0; });
  ASSERT_GE(accepted, 0) << "the follower never connected";
  pump({&follower}, 0.2, [] { return false; });  // its connect completes, and it says hello
  char hello[16] = {};
  ASSERT_GT(::recv(accepted, hello, sizeof hello, 0), 0) << "the follower did not finish connecting";
  const linger reset{1, 0};  // close with a reset, as a listener closing over its backlog does
  ::setsockopt(accepted, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(accepted);
  ::close(exiting);
  pump({&follower}, 0.5, [&] { return follower.lost().has_value(); });
  EXPECT_FALSE(follower.lost().has_value()) << *follower.lost();
  EXPECT_EQ(follower.connections(), 0);
  // A machine 0 that does answer is reached on the next try.
  MachineLink leader(machine(0, port), 5.0);
  leader.set_attempt(4);
  pump({&leader, &follower}, 5, [&] { return follower.leader_attempt().has_value(); });
  EXPECT_EQ(follower.leader_attempt(), 4);
  EXPECT_EQ(follower.connections(), 1);
  EXPECT_FALSE(follower.lost().has_value()) << *follower.lost();
}

// The other half of the fix: once machine 0's ranks ended, its agent port refuses new connections at
// once, before the goodbye goes out, so that no connection waits in a backlog to be reset.
TEST(MachineLink, MachineZeroStopsListeningWhenItSaysGoodbye) {
  const int port = free_port();
  MachineLink leader(machine(0, port), 5.0);
  MachineLink follower(machine(1, port), 5.0);
  pump({&leader, &follower}, 5, [&] { return follower.leader_attempt().has_value(); });
  ASSERT_TRUE(follower.leader_attempt().has_value());
  leader.say_goodbye();
  const int late = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in address = loopback(port);
  EXPECT_NE(::connect(late, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(errno, ECONNREFUSED);
  ::close(late);
  pump({&leader, &follower}, 0.5, [] { return false; });
  EXPECT_FALSE(follower.lost().has_value()) << *follower.lost();
}

TEST(MachineLink, AFailedRankStopsTheOtherMachinesOfItsAttemptOnly) {
  const int port = free_port();
  MachineLink leader(machine(0, port), 5.0);
  leader.set_attempt(2);
  MachineLink follower(machine(1, port), 5.0);
  pump({&leader, &follower}, 5, [&] { return follower.leader_attempt().has_value(); });
  ASSERT_EQ(follower.leader_attempt(), 2);
  follower.set_attempt(1);  // a report from an attempt machine 0 has left behind
  follower.announce_failure();
  pump({&leader, &follower}, 0.5, [] { return false; });
  EXPECT_FALSE(leader.lost().has_value()) << *leader.lost();
  follower.set_attempt(2);
  follower.announce_failure();
  pump({&leader, &follower}, 5, [&] { return leader.lost().has_value(); });
  ASSERT_TRUE(leader.lost().has_value());
  EXPECT_EQ(*leader.lost(), "machine 1 (127.0.0.1) reported that a rank failed there");
}

TEST(MachineLink, BusyAgentPortIsNamedWithTheFix) {
  const int port = free_port();
  MachineLink first(machine(0, port), 1.0);
  try {
    MachineLink second(machine(0, port), 1.0);
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot listen on port " + std::to_string(port) + " (--main_process_port + 1)"));
    EXPECT_THAT(e.what(), HasSubstr("choose a --main_process_port whose next port is free too"));
  }
}

}  // namespace
}  // namespace acc::launcher
