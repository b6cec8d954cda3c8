#include "comm/rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <unistd.h>

#include <acc/errors.h>
#include <acc/warnings.h>

#include <future>
#include <thread>

#include "comm/acc_store.h"
#include "comm/deadline_store.h"
#include "comm/gate/gate_handshake.h"
#include "comm/process_group.h"
#include "comm/gate/store_client.h"
#include "comm/gate/store_gate.h"
#include "comm/gate/store_socket.h"

namespace acc::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Not under the attempt's prefix: a rank of another job must be able to read it, to be told.
const char* const kJobKey = "acc/job";

struct Deadline {
  Clock::time_point at;
  Milliseconds total;
  Milliseconds left() const {
    return std::max(Milliseconds(1), std::chrono::duration_cast<Milliseconds>(at - Clock::now()));
  }
};

std::string rank_text(const LaunchInfo& launch) {
  return "rank " + std::to_string(launch.rank) + " of " + std::to_string(launch.world_size);
}

std::string job_text(const std::string& id) { return id.empty() ? "no job id" : "job '" + id + "'"; }

c10::intrusive_ptr<c10d::TCPStore> serve_on(const ListeningSocket& socket, const Deadline& deadline) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(socket.port);
  options.isServer = true;
  options.waitWorkers = false;  // acc's own arrival check below names the ranks that are missing
  options.timeout = deadline.left();
  options.masterListenFd = socket.fd;  // the store owns it from here
  try {
    return c10::make_intrusive<c10d::TCPStore>(socket.connect_host, options);
  } catch (const std::exception& e) {
    throw DistributedError("acc: rank 0 could not serve the rendezvous store on port " +
                           std::to_string(socket.port) + ": " + error_text(e));
  }
}

// Rank 0: c10d's store on the reserved or bound socket; with a secret, the gate on that socket,
// serving the keys itself (comm/gate/store_gate.h): no store listens anywhere else.
JoinedStore serve(const LaunchInfo& launch, const Deadline& deadline) {
  ListeningSocket socket = launch.store_listen_fd ? adopt_listening_socket(*launch.store_listen_fd)
                                                  : listen_for_store(launch.master_addr, launch.master_port);
  if (!socket.fallback_reason.empty()) warn("acc: warning: " + socket.fallback_reason);
  if (launch.store_secret.empty()) return {serve_on(socket, deadline), nullptr};
  GateOptions options;
  options.on_refused = [](const std::string& why) {
    warn("acc: warning: " + (why.rfind("acc: ", 0) == 0 ? why.substr(5) : why));
  };
  auto gate = std::make_shared<StoreGate>(socket.fd, launch.store_secret, options);
  // Rank 0's own connections (and their clones) are socketpairs the gate serves: no handshake.
  auto open = std::make_shared<const AccStore::Opener>([weak = std::weak_ptr<StoreGate>(gate)] {
    const auto alive = weak.lock();
    if (!alive) throw DistributedError("acc: rank 0's store gate has been shut down; no store call can be made");
    return StoreConnection(alive->adopt_local());
  });
  return {c10::make_intrusive<AccStore>(open, deadline.left()), gate};
}

c10::intrusive_ptr<c10d::TCPStore> connect_client(const LaunchInfo& launch, const Deadline& deadline,
                                                  const std::string& who) {
  const std::string where = launch.master_addr + ":" + std::to_string(launch.master_port);
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(launch.master_port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = deadline.left();
  auto connected = std::make_shared<std::promise<c10::intrusive_ptr<c10d::TCPStore>>>();
  auto result = connected->get_future();
  std::thread([connected, host = launch.master_addr, options] {
    try {
      connected->set_value(c10::make_intrusive<c10d::TCPStore>(host, options));
    } catch (...) {
      connected->set_exception(std::current_exception());
    }
  }).detach();
  if (result.wait_until(deadline.at) != std::future_status::ready) {
    throw DistributedError("acc: " + rank_text(launch) + " connected to " + where + ", but " + who +
                           " did not answer within " + seconds_text(deadline.total) +
                           ": rank 0 has not created its Accelerator yet (acc-launch holds the port "
                           "for it from the start), or another program listens on that port");
  }
  try {
    return result.get();
  } catch (const std::exception& e) {
    throw DistributedError("acc: " + rank_text(launch) + " could not join " + who + " at " + where +
                           ": " + error_text(e));
  }
}

// c10d's client connects, then waits for the server without a deadline of its own when something
// accepts connections but does not answer (a port held for a rank 0 that is still busy or stuck):
// the connection is made on a helper thread, and abandoned to it when the deadline passes. With a
// secret, acc's own client proves the secret to rank 0's gate and has deadlines of its own.
JoinedStore join(const LaunchInfo& launch, const Deadline& deadline) {
  const std::string where = launch.master_addr + ":" + std::to_string(launch.master_port);
  const std::string who = launch.agent_store ? "torchrun's agent store" : "rank 0's store";
  if (!launch.store_secret.empty() && !launch.agent_store) {
    check_store_secret(launch.store_secret);
    StoreClientOptions options;
    options.connect_timeout = deadline.left();
    options.handshake_timeout = std::min(deadline.left(), Milliseconds(10000));
    auto open = std::make_shared<const AccStore::Opener>(
        [host = launch.master_addr, port = launch.master_port, secret = launch.store_secret, options] {
          return StoreConnection::connect(host, port, secret, options);
        });
    try {
      return {c10::make_intrusive<AccStore>(open, deadline.left()), nullptr};
    } catch (const std::exception& e) {
      const std::string why = error_text(e);
      throw DistributedError("acc: " + rank_text(launch) + ": " + (why.rfind("acc: ", 0) == 0 ? why.substr(5) : why));
    }
  }
  if (auto why = wait_until_listening(launch.master_addr, launch.master_port, deadline.at)) {
    throw DistributedError("acc: " + rank_text(launch) + " could not reach " + who + " at " + where +
                           " within " + seconds_text(deadline.total) + " (" + *why +
                           "). Rank 0 has not started or has exited, or MASTER_ADDR/MASTER_PORT "
                           "point elsewhere; the deadline is AcceleratorOptions().timeout(...)");
  }
  return {connect_client(launch, deadline, who), nullptr};
}

// A rank must never train with another job's ranks: two jobs given one port, or a rank started by
// hand with a stale MASTER_PORT.
void check_job(c10d::Store& store, const LaunchInfo& launch, bool publishes, const Deadline& deadline) {
  const std::string where = launch.master_addr + ":" + std::to_string(launch.master_port);
  const StoreDeadlineGuard within(deadline.left());
  if (publishes) {
    store.set(kJobKey, std::vector<uint8_t>(launch.job_id.begin(), launch.job_id.end()));
    return;
  }
  try {
    store.wait({kJobKey}, deadline.left());
  } catch (const std::exception&) {
    throw DistributedError("acc: " + rank_text(launch) + " joined the store at " + where +
                           ", but rank 0 did not publish its job id there within " +
                           seconds_text(deadline.total) + ": rank 0 is not an acc program, or is stuck");
  }
  const auto bytes = store.get(kJobKey);
  const std::string served(bytes.begin(), bytes.end());
  if (served != launch.job_id) {
    throw DistributedError("acc: " + rank_text(launch) + " (" + job_text(launch.job_id) +
                           ") reached the store at " + where + " of another job (" + job_text(served) +
                           "): two jobs use the same port. Give each job its own port "
                           "(acc-launch --main_process_port, or MASTER_PORT), or start every rank "
                           "with the same ACC_JOB_ID");
  }
}

std::string arrival_key(int rank) { return "arrived/" + std::to_string(rank); }

std::string list(const std::vector<int>& ranks) {
  std::string text;
  for (int rank : ranks) text += (text.empty() ? "" : ", ") + std::to_string(rank);
  return text;
}

std::vector<int> missing_ranks(c10d::Store& store, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r)
    if (!store.check({arrival_key(r)})) missing.push_back(r);
  return missing;
}

// Every rank waits for every other, so each one can say who is missing. The list is taken shortly
// before the deadline: at the deadline rank 0 gives up too, and the store it serves goes with it.
void wait_for_arrivals(c10d::Store& store, const LaunchInfo& launch, const Deadline& deadline) {
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  const std::string me = std::string(host) + " pid " + std::to_string(::getpid());
  store.set(arrival_key(launch.rank), std::vector<uint8_t>(me.begin(), me.end()));
  store.add("arrivals", 1);
  const auto snapshot_at = deadline.at - std::min(deadline.total / 10, Milliseconds(500));
  std::vector<int> missing;
  bool snapshot_taken = false;
  try {
    // One counter read per poll, however many ranks: cheap for the store's single thread.
    // Each call on the store within what is left of the deadline (and a moment for the answer to a
    // call made just before it): rank 0 may stop answering.
    const Milliseconds answer_time = std::min(deadline.total / 20, Milliseconds(250));
    auto arrived = [&] {
      const StoreDeadlineGuard within(deadline.left() + answer_time);
      return store.add("arrivals", 0);
    };
    while (arrived() < launch.world_size) {
      const auto now = Clock::now();
      if (now >= deadline.at) break;
      if (now >= snapshot_at && !snapshot_taken) {
        const StoreDeadlineGuard within(deadline.left() + answer_time);
        missing = missing_ranks(store, launch.world_size);
        snapshot_taken = true;
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(50), deadline.at - now));
    }
    // Past the deadline, the last look at the store is short.
    const StoreDeadlineGuard last_look(std::min(deadline.total / 10, Milliseconds(500)));
    if (Clock::now() < deadline.at || store.add("arrivals", 0) >= launch.world_size) return;
    missing = missing_ranks(store, launch.world_size);
  } catch (const StoreNotAnswering& e) {
    throw DistributedError("acc: " + rank_text(launch) + ": during the rendezvous, " +
                           std::string(e.what()).substr(std::string("acc: ").size()));
  } catch (const std::exception& e) {
    // The store went away: rank 0 gave up at its own deadline (with the list taken before), or exited.
    if (!snapshot_taken) {
      throw DistributedError("acc: " + rank_text(launch) + ": rank 0's store closed during the rendezvous (" +
                             error_text(e) + "): rank 0 has exited; see its output");
    }
    // Rank 0's deadline can pass a few milliseconds before this rank's (it started earlier): the
    // deadline this rank reports is its own.
    std::this_thread::sleep_until(deadline.at);
  }
  if (missing.empty()) return;  // the last rank arrived as the deadline passed
  throw DistributedError(
      "acc: " + rank_text(launch) + ": rendezvous incomplete after " + seconds_text(deadline.total) +
      ": rank" + (missing.size() > 1 ? "s " : " ") + list(missing) + " did not arrive (" +
      std::to_string(launch.world_size - static_cast<int>(missing.size())) + " of " +
      std::to_string(launch.world_size) +
      " did). They have not started, failed before creating their Accelerator, or were started with "
      "another MASTER_ADDR, MASTER_PORT or WORLD_SIZE; see their output. The deadline is "
      "AcceleratorOptions().timeout(...)");
}

}  // namespace

JoinedStore rendezvous(const LaunchInfo& launch, Milliseconds timeout) {
  const Deadline deadline{Clock::now() + timeout, timeout};
  if (launch.agent_store && !launch.store_secret.empty()) {
    warn("acc: warning: ACC_STORE_SECRET is ignored: torchrun's agent serves the store, and acc cannot "
         "put its gate in front of it");
  }
  const bool serves = launch.rank == 0 && !launch.agent_store;
  JoinedStore joined = serves ? serve(launch, deadline) : join(launch, deadline);
  // From here every call on the store (this rendezvous's, then Gloo's, NCCL's and acc's) answers or
  // raises within the deadline: c10d's client waits for answers without one, and a rank 0 stopped
  // (SIGSTOP, a debugger) or cut off keeps the connection open and never answers.
  joined.store = c10::make_intrusive<DeadlineStore>(
      std::move(joined.store), timeout,
      (launch.agent_store ? "torchrun's agent store at " : "rank 0's store at ") + launch.master_addr + ":" +
          std::to_string(launch.master_port));
  check_job(*joined.store, launch, launch.rank == 0, deadline);
  // Under torchrun's agent store, keys outlive a restart: each attempt gets its own.
  joined.store = c10::make_intrusive<c10d::PrefixStore>(
      "acc/attempt_" + std::to_string(launch.restart_count), joined.store);
  wait_for_arrivals(*joined.store, launch, deadline);
  return joined;
}

}  // namespace acc::detail
