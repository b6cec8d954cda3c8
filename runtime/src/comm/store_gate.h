#pragma once
// An authenticating TCP gate in front of rank 0's TCPStore, for jobs that span machines.
//
// c10d's TCPStore has no authentication, and its protocol lets any client list every key, so the
// store itself must not face the network. Instead:
//
//   rank r (any machine)                         rank 0's machine
//   TCPStore client --> StoreRelay ==network==> StoreGate --> TCPStore server
//        127.0.0.1:relay.port()      handshake   main address    127.0.0.1 only
//
// The gate accepts on the address other machines reach; each connection must prove it knows the
// job's secret (ACC_STORE_SECRET) before the gate opens a connection to the store, and the gate
// proves it back before the relay sends anything of the store's (comm/gate_handshake.h has the
// protocol). The relay listens on 127.0.0.1 and carries only this process's own connections
// (comm/peer_process.h), so other local users cannot borrow it. The connection is authenticated,
// not encrypted.
//
// Threads: each gate and each relay runs one event-loop thread (comm/socket_relay.h); their hooks
// are called on that thread. Torch-free.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace acc::detail {

class RelayLoop;

/// A good store secret: 32 bytes from the kernel's CSPRNG as 64 hex characters. Throws acc::Error
/// if the kernel gives no random bytes.
std::string new_store_secret();

struct GateOptions {
  /// A client that has not completed the handshake this long after connecting is dropped. A rank
  /// answers within a round trip; the time is for a loaded machine, not a slow protocol.
  std::chrono::milliseconds handshake_timeout{3000};
  /// Against a flood of connections that never prove the secret (this gate faces the network):
  /// the gate never stops accepting, and when this many connections are in their handshake, or
  /// max_pending_per_address from one address, it closes the oldest of them (of that address) for
  /// each new one. A rank answers the greeting at once, so it is never the oldest for long; one
  /// closed all the same (a rank's relay) connects again. Both caps are lowered to a quarter of
  /// RLIMIT_NOFILE, so silent connections cannot exhaust rank 0's descriptors.
  std::size_t max_pending_handshakes = 1024;
  std::size_t max_pending_per_address = 64;
  /// Called once, for the first refused connection, with a sentence naming the peer and why
  /// (route it to a warning). On the gate's thread; must not block or destroy the gate.
  std::function<void(const std::string&)> on_refused;
};

class StoreGate {
 public:
  /// Serves the gate on `listen_fd`, a TCP socket already bound (to the address other machines
  /// reach) and listening, which the gate owns from now on (it is closed with the gate, also when
  /// this constructor throws). Clients that pass the handshake are relayed to the store at
  /// upstream_host:upstream_port (which should listen on 127.0.0.1 only). Starts the gate's thread.
  /// Throws acc::ConfigError if `secret` is too short (check_store_secret), acc::DistributedError if
  /// the upstream host does not resolve, acc::Error if listen_fd is not a listening socket or the
  /// thread cannot start.
  StoreGate(int listen_fd, const std::string& upstream_host, int upstream_port, std::string secret,
            GateOptions options = {});
  /// Stops accepting, closes every connection it carries, joins its thread. Returns promptly.
  ~StoreGate();
  StoreGate(const StoreGate&) = delete;
  StoreGate& operator=(const StoreGate&) = delete;

  /// The port the gate listens on.
  int port() const { return port_; }
  /// Connections refused so far: wrong secret, not the protocol, closed or silent during the
  /// handshake. (The first is also reported through GateOptions::on_refused.)
  uint64_t refused() const { return counters_->refused.load(); }
  /// Connections that passed the handshake so far.
  uint64_t admitted() const { return counters_->admitted.load(); }
  /// Connections the gate holds now (any phase).
  std::size_t connections() const;

 private:
  struct Counters {
    std::atomic<uint64_t> refused{0};
    std::atomic<uint64_t> admitted{0};
  };
  int port_ = 0;
  std::unique_ptr<Counters> counters_;
  std::unique_ptr<RelayLoop> loop_;
};

struct RelayOptions {
  /// How long each connection keeps trying to reach the gate (rank 0 may start later than this
  /// rank); give it the store's timeout.
  std::chrono::milliseconds connect_timeout{300000};
  /// How long the gate has, once reached, to complete the handshake.
  std::chrono::milliseconds handshake_timeout{10000};
  /// Called once, for the first connection to the relay's port from another process, with a
  /// sentence saying whose. On the relay's thread; must not block or destroy the relay.
  std::function<void(const std::string&)> on_refused;
};

class StoreRelay {
 public:
  /// Listens on 127.0.0.1:port(); every connection this process makes there is carried to the
  /// gate at gate_host:gate_port after the handshake. Starts the relay's thread.
  /// Throws acc::ConfigError if `secret` is too short, acc::DistributedError if gate_host does
  /// not resolve, acc::Error if the loopback socket or the thread cannot be made.
  StoreRelay(const std::string& gate_host, int gate_port, std::string secret, RelayOptions options = {});
  /// Closes the port and every connection it carries, joins its thread. Returns promptly.
  ~StoreRelay();
  StoreRelay(const StoreRelay&) = delete;
  StoreRelay& operator=(const StoreRelay&) = delete;

  /// The loopback port to give the TCPStore client (host 127.0.0.1).
  int port() const { return port_; }

  /// Opens one connection through the relay and returns wait_for_handshake(timeout), then closes
  /// it. Call it before creating the TCPStore client: on a refused secret c10d's client retries
  /// "connection reset" until its own timeout, while this answers as soon as the gate has refused.
  /// (The probe reaches rank 0's store as a connection that closes without a request.)
  std::optional<std::string> check(std::chrono::milliseconds timeout) const;
  /// Waits until the first connection's handshake with the gate has ended, or `timeout`. nullopt:
  /// it succeeded (the gate knows the secret and accepted this rank's). Else the reason, a sentence
  /// for the user (without a rank: prefix it), when it failed (wrong secret, not a gate, the gate
  /// unreachable for connect_timeout) or nothing ended in time (then it says so, with the last
  /// connection error). The first ending counts: a later failure does not undo a success.
  /// A failure is recorded before the relay closes the local connection, so a TCPStore client
  /// that saw its connection closed can ask with a zero timeout.
  std::optional<std::string> wait_for_handshake(std::chrono::milliseconds timeout) const;
  /// The first handshake or connect failure so far, if any (never a timeout of the caller's).
  std::optional<std::string> failure() const;
  /// Connections to port() from other processes refused so far.
  uint64_t refused() const { return state_->refused.load(); }
  /// Connections this relay holds now (any phase).
  std::size_t connections() const;

 private:
  struct State {
    mutable std::mutex mutex;
    mutable std::condition_variable ended;
    std::optional<bool> first_outcome;  // true: succeeded
    std::optional<std::string> first_failure;
    std::string last_connect_error;  // of an attempt that is being retried
    std::atomic<uint64_t> refused{0};
  };
  std::string gate_;
  int port_ = 0;
  std::unique_ptr<State> state_;
  std::unique_ptr<RelayLoop> loop_;
};

}  // namespace acc::detail
