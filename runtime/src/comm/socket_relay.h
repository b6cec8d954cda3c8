#pragma once
// The event loop behind the store gate and the store relay (comm/store_gate.h). For every
// connection accepted on its listening socket it opens a second leg to a fixed target, runs a
// handshake (comm/gate_handshake.h) on one of the two legs, then relays bytes both ways until both
// sides have closed. Torch-free.
//
//   gate:  accepted leg = a rank's relay;  handshake on it, then connect to the store (loopback)
//   relay: accepted leg = this process's TCPStore client;  connect to the gate (retrying while it
//          is not up yet), handshake on that leg
//
// Thread model: one thread per loop, on epoll, every socket non-blocking. Not a thread per
// connection: rank 0's gate carries every rank's store connections (thousands in a large job), a
// connection that never speaks must cost a timer and nothing else, and one thread makes stopping
// simple (an eventfd wakes it; it closes everything and is joined). Throughput is not the limit:
// the loop copies through one 256 KiB buffer at memory speed, while TCPStore's own server is one
// libuv thread too.
//
// Relaying: a direction reads only while nothing it read is waiting to be written (the unwritten
// rest of one read is kept, at most 256 KiB per direction); so a slow reader slows its writer
// instead of growing memory. A read of 0 (the peer's shutdown(SHUT_WR)) is passed on as
// shutdown(SHUT_WR) once everything before it is written; the connection closes when both
// directions have ended, or at once on an error on either leg. As TCP's half-close allows, a leg
// that has ended its own direction is not watched further: if its peer then goes away while the
// other leg stays open and silent, the connection is closed at the other leg's next write or end.
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/gate_handshake.h"
#include "comm/socket_util.h"

namespace acc::detail {

/// What a loop reports to its owner, on the loop's thread.
struct RelayEvent {
  enum class Kind {
    kNotAdmitted,         // admit() refused an accepted connection
    kHandshakeFailed,     // the peer failed the handshake, closed or stalled during it
    kHandshakeSucceeded,  // the handshake is done (the gate connects upstream after this)
    kConnectRetrying,     // an attempt to connect the second leg failed; it will be retried
    kConnectFailed,       // the second leg could not be connected (after retries, if any)
    kLoopFailed,          // the loop itself stopped on an unexpected error (text says which)
  };
  Kind kind;
  std::string peer;  // the accepted connection's peer, "host:port"
  std::string text;
};

struct RelayLoopConfig {
  /// Listening, owned by the loop (made non-blocking; closed when the loop is destroyed).
  Fd listener;
  /// Where the second leg connects, tried in turn; `target_name` names it in errors.
  std::vector<SocketAddress> target;
  std::string target_name;
  /// Which leg carries the handshake.
  enum class HandshakeLeg { kAccepted, kConnected } handshake_leg = HandshakeLeg::kAccepted;
  /// From the moment the handshake's leg is connected until it is done.
  std::chrono::milliseconds handshake_timeout{10000};
  /// From accept until the second leg is connected (all attempts, when retrying).
  std::chrono::milliseconds connect_timeout{10000};
  /// Retry a failed connect (with backoff up to 1 s) until connect_timeout; else the first failure ends it.
  bool retry_connect = false;
  /// Accepted connections not yet relaying (in a handshake or connecting) beyond which the loop
  /// stops accepting until some finish: connections that never speak cannot exhaust descriptors;
  /// the kernel's backlog holds the rest. (Not with shed_unauthenticated, which bounds them itself.)
  std::size_t max_unestablished = 1024;
  /// The gate's policy against a flood (handshake on the accepted leg only): never stop accepting,
  /// and when more than max_unauthenticated accepted connections are in their handshake, or more
  /// than max_unauthenticated_per_address from one address, close the oldest of them (of that
  /// address). A client that knows the secret answers within a round trip, so it is never the
  /// oldest for long, while a waiting one in the listen backlog would wait for a whole timeout.
  /// Both caps are lowered to fit a quarter of RLIMIT_NOFILE.
  bool shed_unauthenticated = false;
  std::size_t max_unauthenticated = 1024;
  std::size_t max_unauthenticated_per_address = 64;
  /// Makes a connection's handshake; called on the loop thread.
  std::function<std::unique_ptr<Handshake>()> make_handshake;
  /// Optional: a reason to refuse an accepted socket before anything else, or nullopt to go on.
  std::function<std::optional<std::string>(int fd)> admit;
  /// Optional: told of each event, on the loop thread; must not block. Exceptions it throws are ignored.
  std::function<void(const RelayEvent&)> on_event;
  /// The loop thread's name (at most 15 characters), for ps and debuggers.
  std::string thread_name = "acc-relay";
};

class RelayLoop {
 public:
  /// Starts the loop's thread. Throws acc::Error if the listener is not a listening socket, or if
  /// the loop's epoll/eventfd/thread cannot be made.
  explicit RelayLoop(RelayLoopConfig config);
  /// Stops the thread, closes the listener and every connection (peers see them closed), joins.
  /// Returns promptly whatever the peers do: the loop never blocks but in epoll_wait.
  ~RelayLoop();
  RelayLoop(const RelayLoop&) = delete;
  RelayLoop& operator=(const RelayLoop&) = delete;

  /// Connections open now (any phase).
  std::size_t connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::thread thread_;
};

}  // namespace acc::detail
