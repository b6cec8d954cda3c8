#pragma once
// The event loop behind rank 0's store gate (comm/gate/store_gate.h): it accepts connections on the
// gate's socket, runs the handshake (comm/gate/gate_handshake.h) on each, and serves the job's keys
// (comm/gate/key_value_table.h) to those that pass it, in store_protocol frames. Rank 0's own store
// connections are socketpairs adopted as already authenticated. Torch-free.
//
// Thread model: one thread, on epoll, every socket non-blocking. Not a thread per connection: rank
// 0 serves every rank's store connections (thousands in a large job), a connection that never
// speaks must cost a timer and nothing else, and one thread makes stopping simple (an eventfd wakes
// it; it closes everything and is joined). It is also what makes the table need no lock and the
// store linearizable: requests run one at a time, in arrival order on each connection.
//
// Serving: a connection has one request in flight. A GET, WAIT or MULTI_GET whose keys are missing
// is parked (the connection is not read meanwhile) until a write to its key tries it again, or its
// timeout answers kTimeout. A connection's next request is read only once its answer is written,
// so a client that does not read its answers slows itself, not the store, and holds at most one
// frame each way.
//
// Against a flood (this socket faces the network in a job on several machines): the loop never
// stops accepting, and when more than max_unauthenticated connections are in their handshake, or
// more than max_unauthenticated_per_address from one address, it closes the oldest of them (of
// that address). A rank answers the greeting within a round trip, so it is never the oldest for
// long; one shed all the same connects again (comm/gate/store_client.h). Both caps are lowered to fit a
// quarter of RLIMIT_NOFILE.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "comm/gate/gate_handshake.h"
#include "comm/gate/socket_util.h"

namespace acc::detail {

/// What the loop reports to its owner, on the loop's thread.
struct StoreServerEvent {
  enum class Kind {
    kHandshakeFailed,     // the peer failed the handshake, closed or stalled during it, or was shed
    kHandshakeSucceeded,  // the peer proved the secret; it is served from now on
    kProtocolError,       // an authenticated peer sent what is not a request; it was closed
    kLoopFailed,          // the loop itself stopped on an unexpected error (text says which)
  };
  Kind kind;
  std::string peer;  // the connection's peer, "host:port"
  std::string text;
};

struct StoreServerConfig {
  /// Listening, owned by the loop (made non-blocking; closed when the loop is destroyed).
  Fd listener;
  /// From accept until the handshake is done.
  std::chrono::milliseconds handshake_timeout{3000};
  std::size_t max_unauthenticated = 1024;
  std::size_t max_unauthenticated_per_address = 64;
  /// Makes a connection's handshake (the server's side); called on the loop thread.
  std::function<std::unique_ptr<Handshake>()> make_handshake;
  /// Optional: told of each event, on the loop thread; must not block. Exceptions it throws are ignored.
  std::function<void(const StoreServerEvent&)> on_event;
  /// The loop thread's name (at most 15 characters), for ps and debuggers.
  std::string thread_name = "acc-store";
};

class StoreServer {
 public:
  /// Starts the loop's thread. Throws acc::Error if the listener is not a listening socket, or if
  /// the loop's epoll/eventfd/thread cannot be made.
  explicit StoreServer(StoreServerConfig config);
  /// Stops the thread, closes the listener and every connection (peers see them closed; parked
  /// requests get no answer), joins. Returns promptly whatever the peers do.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  /// A new connection to the store that needs no handshake: the loop serves one end of a
  /// socketpair, the caller owns the other (close-on-exec, blocking). For this process's own
  /// clients. Throws acc::Error if the pair cannot be made or the loop has stopped.
  Fd adopt_local();

  /// Connections open now (any phase).
  std::size_t connections() const;
  /// Requests waiting for a key now, and keys in the table (for tests: nothing leaks).
  std::size_t parked() const;
  std::size_t keys() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

}  // namespace acc::detail
