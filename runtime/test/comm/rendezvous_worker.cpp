// One rank of a rendezvous scenario (started by rendezvous_test.cpp with torchrun's variables, or by
// acc-launch from concurrent_jobs.sh). Joins the job with the deadline given in milliseconds, then:
//   sum         all-reduces rank+1 and checks the sum;
//   same_parent all-gathers its parent's pid: every peer must have been started by the same launcher,
//               so a rank that trained with another job's ranks is caught;
//   loopback    (rank 0) the store's port listens on 127.0.0.1 only, per /proc/net/tcp{,6};
//   gated       (rank 0, with ACC_STORE_SECRET) a plain TCPStore client at MASTER_PORT, without the
//               secret, cannot read the job's keys;
//   shared_gpu  NCCL's one-GPU-per-rank check on made-up GPUs (ranks r and r+2 share GPU-(r%2)); rank 0
//               comes last and then drops the store at once, as a process group that failed to start
//               does: every rank must still print the same error ("SHARED: ...").
//   sigpipe     writes with writev(2), as Gloo's TCP pairs do, to a socket whose peer has closed: the
//               write must fail with EPIPE instead of SIGPIPE ending the rank;
//   sigpipe_own installs its own SIGPIPE handler before the Accelerator: it must still be installed;
//   peer_dies   rank 1 exits (status 3) while rank 0 sends it a large all-reduce: rank 0 must end with
//               an error ("PEER ERROR: ..."), exit 1, not die of SIGPIPE;
//   stopped_zero rank 0 is stopped (SIGSTOP, by a child of its own) 1.5 s into the rendezvous and
//               continued 12 s later; the others must fail within their deadline, naming the store
//               that does not answer (run with a rank missing, so the rendezvous is still waiting);
//   hold MS     stays in the job MS milliseconds more (another job's rank tries to join meanwhile).
// Issue 35, item 3 (store_access_worker.h; the test's directory is ACC_TEST_DIR):
//   store_only  the rendezvous alone, no process group (so no Gloo listener): announces its pid,
//               holds until the test has looked at its sockets, then prints the job id it reads
//               ("JOB rank R reads '...'");
//   store_held  the same with the whole Accelerator (Gloo included);
//   probe P...  not a rank: a local process without the secret tries a TCPStore client at each port;
//   rogue PID DIR  not a rank: writes acc/job=rogue through every listener of PID's processes.
// Prints "OK ..." and exits 0, or "FAIL: ..." and exits 1; a failed rendezvous prints
// "RENDEZVOUS FAILED after N ms: <message>" and exits 2.
#include <ATen/ops/full.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include <acc/accelerator.h>
#include <acc/collectives.h>
#include <acc/errors.h>
#include <acc/state.h>

#include "comm/gpu_per_rank.h"
#include "comm/process_group.h"
#include "comm/rendezvous.h"
#include "store_access_worker.h"
#include "worker_checks.h"

namespace {

using Clock = std::chrono::steady_clock;

using acc::testing::failed;

// Local addresses (hex "0100007F:1F90" style) of the sockets listening on `port` in a /proc/net table.
std::vector<std::string> listeners(const std::string& table, int port) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // header
  std::vector<std::string> found;
  char port_hex[8];
  std::snprintf(port_hex, sizeof(port_hex), "%04X", port);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.substr(local.find(':') + 1) == port_hex) found.push_back(local.substr(0, local.find(':')));
  }
  return found;
}

void own_sigpipe_handler(int) {}

// How long a rank holds for the test's probes at most (the test writes ACC_TEST_DIR/probed sooner).
constexpr std::chrono::seconds kHoldLimit(40);

// The rendezvous as the Accelerator does it (launch from the environment, one deadline), and
// nothing more: the store's sockets are then the only ones the rank has.
int store_only(std::chrono::milliseconds timeout, Clock::time_point start) {
  namespace sa = acc::testing::store_access;
  const acc::LaunchInfo launch = acc::detect_launch();
  acc::detail::JoinedStore joined;
  try {
    joined = acc::detail::rendezvous(launch, timeout);
  } catch (const acc::Error& e) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    std::cout << "RENDEZVOUS FAILED after " << ms << " ms: " << e.what() << std::endl;
    return 2;
  }
  sa::announce_and_hold(launch.rank, kHoldLimit);
  try {
    std::cout << "JOB rank " << launch.rank << " reads '" << sa::job_as_read(*joined.store) << "'" << std::endl;
  } catch (const std::exception& e) {
    return failed(std::string("the store after the probes: ") + e.what());
  }
  // Rank 0 serves the store, so it leaves last (told through the test's directory, not the store:
  // a rank's last word to a store whose server may then exit could be lost).
  if (!sa::leave_in_order(launch.rank, launch.world_size, kHoldLimit)) return failed("the other ranks did not leave");
  std::cout << "OK store_only rank " << launch.rank << " of " << launch.world_size << std::endl;
  return 0;
}

// What a write to a closed connection does in this process: "EPIPE", another errno, or nothing
// (SIGPIPE's default action ends the process before this returns).
std::string write_to_closed_peer() {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return std::strerror(errno);
  ::close(pair[1]);
  char byte = 'x';
  iovec iov{&byte, 1};
  const ssize_t n = ::writev(pair[0], &iov, 1);  // no MSG_NOSIGNAL possible, as in Gloo
  const int error = errno;
  ::close(pair[0]);
  if (n >= 0) return "the write succeeded";
  return error == EPIPE ? "EPIPE" : std::strerror(error);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return failed("usage: acc_rendezvous_worker TIMEOUT_MS SCENARIO [hold MS] (scenarios: see the top of rendezvous_worker.cpp)");
  const std::chrono::milliseconds timeout(std::atoi(argv[1]));
  const std::string scenario = argv[2];
  const auto start = Clock::now();
  namespace sa = acc::testing::store_access;
  if (scenario == "probe" || scenario == "rogue") {
    // c10d logs each refused client with a stack trace; what the intruders found is on stdout.
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) ::dup2(null, 2);
  }
  if (scenario == "probe") {
    std::vector<int> ports;
    for (int i = 3; i < argc; ++i) ports.push_back(std::atoi(argv[i]));
    return sa::probe_main(ports, timeout);
  }
  if (scenario == "rogue") {
    if (argc < 5) return failed("usage: acc_rendezvous_worker LIMIT_MS rogue ROOT_PID DIR");
    return sa::rogue_main(static_cast<pid_t>(std::atoi(argv[3])), argv[4], timeout);
  }
  if (scenario == "store_only") return store_only(timeout, start);
  // As acc-launch starts ranks, whatever the test runner ignores (SIG_IGN is inherited across exec).
  if (scenario == "sigpipe" || scenario == "peer_dies") ::signal(SIGPIPE, SIG_DFL);
  if (scenario == "sigpipe_own") ::signal(SIGPIPE, own_sigpipe_handler);
  if (scenario == "stopped_zero" && std::string(std::getenv("RANK")) == "0") {
    const pid_t self = ::getpid();
    if (::fork() == 0) {  // only async-signal-safe calls from here
      for (int fd = 0; fd < 1024; ++fd) ::close(fd);  // the test reads the rank's output to its end
      ::usleep(1500 * 1000);
      ::kill(self, SIGSTOP);
      ::sleep(12);
      ::kill(self, SIGCONT);
      ::_exit(0);
    }
  }
  std::unique_ptr<acc::Accelerator> accelerator;
  try {
    accelerator = std::make_unique<acc::Accelerator>(acc::AcceleratorOptions().cpu(true).timeout(timeout));
  } catch (const acc::Error& e) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    std::cout << "RENDEZVOUS FAILED after " << ms << " ms: " << e.what() << std::endl;
    return 2;
  }
  const int rank = accelerator->process_index();
  const int size = accelerator->num_processes();
  if (scenario == "sum") {
    const double sum = acc::reduce(at::full({1}, rank + 1.0), "sum").item<double>();
    if (sum != size * (size + 1) / 2.0) return failed("sum " + std::to_string(sum));
  } else if (scenario == "same_parent") {
    const auto parents = acc::gather(at::full({1}, static_cast<double>(::getppid())));
    for (int r = 0; r < size; ++r)
      if (parents[r].item<double>() != ::getppid())
        return failed("rank " + std::to_string(r) + " was started by another launcher: it belongs to another job");
  } else if (scenario == "loopback") {
    if (rank == 0) {
      const int port = std::atoi(std::getenv("MASTER_PORT"));
      const auto v4 = listeners("/proc/net/tcp", port);
      const auto v6 = listeners("/proc/net/tcp6", port);
      if (v4.size() != 1 || v4[0] != "0100007F" || !v6.empty())
        return failed("the store's port " + std::to_string(port) + " listens on " + std::to_string(v4.size()) +
                    " IPv4 address(es)" + (v4.empty() ? "" : " (first " + v4[0] + ")") + " and " +
                    std::to_string(v6.size()) + " IPv6 one(s), not on 127.0.0.1 only");
    }
    accelerator->wait_for_everyone();
  } else if (scenario == "gated") {
    if (rank == 0) {
      c10d::TCPStoreOptions options;
      options.port = static_cast<uint16_t>(std::atoi(std::getenv("MASTER_PORT")));
      options.timeout = std::chrono::milliseconds(2000);
      try {
        c10d::TCPStore intruder("127.0.0.1", options);
        intruder.get("acc/job");
        return failed("a client without the secret read the job id through the gate");
      } catch (const std::exception&) {
        std::cout << "the gate kept out a client without the secret" << std::endl;
      }
    }
    accelerator->wait_for_everyone();
  } else if (scenario == "store_held") {
    sa::announce_and_hold(rank, kHoldLimit);
    std::cout << "JOB rank " << rank << " reads '" << sa::job_as_read(accelerator->state().process_group()->store())
              << "'" << std::endl;
  } else if (scenario == "sigpipe") {
    const std::string outcome = write_to_closed_peer();
    if (outcome != "EPIPE") return failed("a write to a closed peer gave: " + outcome);
    std::cout << "a write to a closed peer failed with EPIPE" << std::endl;
  } else if (scenario == "sigpipe_own") {
    struct sigaction current {};
    sigaction(SIGPIPE, nullptr, &current);
    if (current.sa_handler != own_sigpipe_handler) return failed("the program's own SIGPIPE handler was replaced");
  } else if (scenario == "peer_dies") {
    accelerator->wait_for_everyone();
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // rank 0 is sending by now
      std::cout << "rank 1 exits" << std::endl;
      ::_exit(3);
    }
    try {
      // 64 MiB per all-reduce: far more than the socket buffers, so rank 0 is writing when rank 1 goes.
      for (int i = 0; i < 50; ++i) acc::reduce(at::full({16 << 20}, 1.0f), "sum");
    } catch (const std::exception& e) {
      std::cout << "PEER ERROR: " << e.what() << std::endl;
      return 1;
    }
    return failed("rank 0's all-reduces succeeded without rank 1");
  } else if (scenario == "shared_gpu") {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    try {
      acc::detail::check_one_gpu_per_rank(*accelerator->state().process_group(),
                                          {"node", "GPU-" + std::to_string(rank % 2), rank % 2});
      return failed("ranks sharing a GPU passed the check");
    } catch (const acc::DistributedError& e) {
      std::cout << "SHARED: " << e.what() << std::endl;
    }
    if (rank == 0) {
      accelerator.reset();
      acc::PartialState::destroy();
    }
    std::cout << "OK " << scenario << " rank " << rank << " of " << size << std::endl;
    return 0;
  } else {
    return failed("unknown scenario " + scenario);
  }
  if (argc >= 5 && std::string(argv[3]) == "hold") std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(argv[4])));
  accelerator->wait_for_everyone();
  std::cout << "OK " << scenario << " rank " << rank << " of " << size << std::endl;
  return 0;
}
