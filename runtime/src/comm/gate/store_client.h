#pragma once
// One client connection to the job's store, which rank 0's gate serves after the handshake
// (comm/gate/store_gate.h, comm/gate/store_protocol.h): connect with retries, prove the secret, then one
// request and its answer at a time, each with a deadline. Blocking; the thread that calls waits.
// The c10d::Store every rank uses (comm/acc_store.h) holds one of these. Torch-free.
#include <acc/errors.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "comm/gate/socket_util.h"
#include "comm/gate/store_protocol.h"

namespace acc::detail {

struct StoreClientOptions {
  /// How long connect() keeps trying to reach the gate: rank 0 may start later than this rank
  /// (give it what is left of the rendezvous deadline). Also bounds the reconnects after a gate
  /// under a flood shed this connection before its verdict.
  std::chrono::milliseconds connect_timeout{300000};
  /// Once a connection is made, the handshake must end within this.
  std::chrono::milliseconds handshake_timeout{10000};
};

/// The connection ended under a call: closed or reset by the other end, an answer that is not a
/// frame of this protocol, or no answer in time. The connection is closed and every later call on
/// it raises this at once.
class StoreConnectionLost : public DistributedError {
 public:
  using DistributedError::DistributedError;
};

class StoreConnection {
 public:
  /// Connects to rank 0's gate at host:port and makes the handshake with `secret`. Retries (50 ms
  /// doubling to 1 s between attempts) while the port refuses or the gate closes the connection
  /// before its verdict, until options.connect_timeout. Throws acc::ConfigError when the secret is
  /// too short; acc::DistributedError, naming host:port, when the host does not resolve, when no
  /// attempt succeeded in time (with the last attempt's error), or at once when the handshake
  /// failed (a wrong secret, a server that is not a gate, no handshake within
  /// options.handshake_timeout).
  static StoreConnection connect(const std::string& host, int port, const std::string& secret,
                                 const StoreClientOptions& options);

  /// A connection that is already authenticated (rank 0's own: StoreGate::adopt_local()). `name`
  /// says whose store it is in errors.
  explicit StoreConnection(Fd fd, std::string name = "rank 0's store");

  StoreConnection(StoreConnection&&) noexcept = default;
  StoreConnection& operator=(StoreConnection&&) noexcept = default;
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;

  /// Sends `request` (under a fresh id) and returns its answer, whatever its status (kTimeout and
  /// kError are the caller's to raise). The whole exchange must end within `answer_within`
  /// (<= 0: no limit); give a blocking op its timeout plus a margin, since the server answers it
  /// with kTimeout at its own deadline. Throws acc::DistributedError, the connection intact, for a
  /// request beyond the protocol's limits (store_protocol::kMax*); StoreConnectionLost otherwise.
  /// Not thread-safe: one call at a time.
  store_protocol::Response call(store_protocol::Request request, std::chrono::milliseconds answer_within);

  /// Whether calls can still be made (no StoreConnectionLost yet).
  bool is_open() const { return fd_.valid(); }
  /// "rank 0's store at host:port" (or the name given).
  const std::string& name() const { return name_; }

 private:
  [[noreturn]] void lose(const std::string& why);

  Fd fd_;
  std::string name_;
  uint32_t last_id_ = 0;
  std::string lost_;  // why the connection was closed, for later calls
};

}  // namespace acc::detail
