#pragma once
// Rank 0's store for a job with a store secret (ACC_STORE_SECRET): an authenticating gate that
// serves the job's keys itself.
//
// c10d's TCPStore has no authentication, and its protocol lets any client read and write every
// key, so in a job with a secret no TCPStore server runs at all:
//
//   rank r (any machine)                          rank 0
//   AccStore --StoreConnection==network==> StoreGate (MASTER_PORT): handshake, then the keys
//   rank 0's own AccStore --socketpair (adopt_local)----^
//
// Each connection must prove it knows the job's secret before the gate reads a request from it,
// and the gate proves it back before the client sends one (comm/gate/gate_handshake.h); the keys are
// served in store_protocol frames (comm/gate/store_protocol.h). The gate's socket is the job store's
// only listening socket, on any rank, so no local user can reach the keys without the secret. The
// connection is authenticated, not encrypted.
//
// Threads: the gate runs one event-loop thread (comm/gate/store_server.h); its hooks are called on it.
// Torch-free.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "comm/gate/socket_util.h"

namespace acc::detail {

class StoreServer;

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
  /// closed all the same connects again. Both caps are lowered to a quarter of
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
  /// this constructor throws). Clients that pass the handshake are served the job's keys. Starts
  /// the gate's thread. Throws acc::ConfigError if `secret` is too short (check_store_secret),
  /// acc::Error if listen_fd is not a listening socket or the thread cannot start.
  StoreGate(int listen_fd, std::string secret, GateOptions options = {});
  /// Stops accepting, closes every connection (a client waiting for a key sees its connection
  /// closed), joins its thread. Returns promptly.
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
  /// Requests waiting for a key now, and keys stored (for tests: nothing leaks).
  std::size_t parked() const;
  std::size_t keys() const;

  /// A connection to the store for this process, authenticated without a handshake (a socketpair
  /// whose other end the gate serves). Throws acc::Error when the gate has stopped.
  Fd adopt_local();

 private:
  struct Counters {
    std::atomic<uint64_t> refused{0};
    std::atomic<uint64_t> admitted{0};
  };
  int port_ = 0;
  std::unique_ptr<Counters> counters_;
  std::unique_ptr<StoreServer> server_;
};

}  // namespace acc::detail
