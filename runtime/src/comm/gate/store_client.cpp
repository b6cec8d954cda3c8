#include "comm/gate/store_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <optional>
#include <thread>
#include <utility>

#include "comm/gate/gate_handshake.h"

namespace acc::detail {

namespace sp = store_protocol;

namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;
using std::chrono::milliseconds;

constexpr milliseconds kFirstBackoff{50};
constexpr milliseconds kMaxBackoff{1000};
// One connect that neither completes nor fails this long will not succeed (the gate accepts at
// once, even under a flood); the next attempt starts afresh.
constexpr milliseconds kConnectAttemptTimeout{10000};
// An attempt started just before the give-up time still gets this long to be refused or accepted
// (on loopback a refusal can come after connect() returned EINPROGRESS).
constexpr milliseconds kLastAttemptGrace{200};

constexpr TimePoint kNever = TimePoint::max();

std::string duration_text(milliseconds timeout) {
  const auto ms = timeout.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

TimePoint deadline_after(milliseconds within) { return within.count() > 0 ? Clock::now() + within : kNever; }

// Waits until `fd` is ready for `events` (or has an error or hang-up, which the next send or recv
// reports) or `deadline` passes: false then.
bool wait_ready(int fd, short events, TimePoint deadline) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline != kNever) {
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
      timeout_ms = left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, INT_MAX));
    }
    pollfd ready{fd, events, 0};
    const int rc = poll(&ready, 1, timeout_ms);
    if (rc > 0) return true;
    if (rc == 0) {
      if (timeout_ms == 0) return false;
      continue;  // the rest of the time (poll may wake a little early)
    }
    if (errno != EINTR) return true;  // let the send or recv name the error
  }
}

enum class Io { kOk, kClosed, kTimeout, kError };
struct IoResult {
  Io io = Io::kOk;
  int error = 0;  // kError: errno
};

IoResult send_all(int fd, std::string_view bytes, TimePoint deadline) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    // MSG_NOSIGNAL: a peer that has gone raises EPIPE here, not SIGPIPE in the whole process.
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_ready(fd, POLLOUT, deadline)) return {Io::kTimeout, 0};
      continue;
    }
    return {Io::kError, errno};
  }
  return {};
}

// Appends bytes to `out` until it holds `size` of them: never more, since the bytes after a
// handshake or an answer belong to what comes next.
IoResult recv_until(int fd, std::string& out, std::size_t size, TimePoint deadline) {
  std::size_t filled = out.size();
  out.resize(size);  // once: a 64 MiB answer comes in many pieces
  IoResult result;
  while (filled < size) {
    const ssize_t n = recv(fd, out.data() + filled, size - filled, 0);
    if (n > 0) {
      filled += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      result = {Io::kClosed, 0};
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (wait_ready(fd, POLLIN, deadline)) continue;
      result = {Io::kTimeout, 0};
      break;
    }
    result = {Io::kError, errno};
    break;
  }
  out.resize(filled);
  return result;
}

// One TCP connect to `address`, ended by `deadline`. The connected socket, or why not.
std::optional<Fd> connect_once(const SocketAddress& address, TimePoint deadline, std::string& error) {
  Fd fd(socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    error = "socket: " + errno_text(errno);
    return std::nullopt;
  }
  if (::connect(fd.get(), address.get(), address.length) == 0) return fd;
  // A non-blocking connect interrupted by a signal goes on in the background, like EINPROGRESS.
  if (errno != EINPROGRESS && errno != EINTR) {
    error = errno_text(errno);
    return std::nullopt;
  }
  const TimePoint started = Clock::now();
  if (!wait_ready(fd.get(), POLLOUT, deadline)) {
    error = "no answer within " + duration_text(std::chrono::duration_cast<milliseconds>(Clock::now() - started));
    return std::nullopt;
  }
  int result = 0;
  socklen_t length = sizeof(result);
  if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &result, &length) != 0) result = errno;
  if (result != 0) {
    error = errno_text(result);
    return std::nullopt;
  }
  return fd;
}

struct HandshakeEnd {
  bool done = false;
  bool retry = false;  // the gate closed before its verdict: shed under a flood, worth another connection
  std::string error;
};

// Drives the client's side of the gate's handshake (comm/gate/gate_handshake.h) on a blocking schedule.
HandshakeEnd run_handshake(int fd, const std::string& secret, const std::string& gate, milliseconds timeout) {
  ClientHandshake handshake(secret, gate);
  const TimePoint deadline = Clock::now() + timeout;
  auto closed = [&](const IoResult& io, std::size_t partial) {
    std::string text = handshake.failure_on_close(partial);
    if (io.io == Io::kError) text += " (" + errno_text(io.error) + ")";
    return HandshakeEnd{false, handshake.retry_after_close(), text};
  };
  if (const std::string opening = handshake.opening(); !opening.empty()) {
    const IoResult sent = send_all(fd, opening, deadline);
    if (sent.io == Io::kTimeout) return {false, false, handshake.failure_on_timeout(timeout, 0)};
    if (sent.io != Io::kOk) return closed(sent, 0);
  }
  for (;;) {
    std::string bytes;
    const IoResult got = recv_until(fd, bytes, handshake.needed(), deadline);
    if (got.io == Io::kTimeout) return {false, false, handshake.failure_on_timeout(timeout, bytes.size())};
    if (got.io != Io::kOk) return closed(got, bytes.size());
    Handshake::Step step = handshake.consume(bytes);
    if (!step.reply.empty()) {
      const IoResult sent = send_all(fd, step.reply, deadline);
      if (sent.io == Io::kTimeout) return {false, false, handshake.failure_on_timeout(timeout, 0)};
      if (sent.io != Io::kOk) return closed(sent, 0);
    }
    if (step.state == Handshake::State::kDone) return {true, false, {}};
    if (step.state == Handshake::State::kFailed) return {false, false, step.error};
  }
}

// A request the server would refuse by closing the connection is refused here instead, with the
// limit it breaks, and the connection stays usable.
void check_limits(const sp::Request& request, const std::string& store) {
  const char* op = sp::op_name(request.op);
  auto refuse = [&](const std::string& what) {
    throw DistributedError("acc: a " + std::string(op) + " request to " + store + " " + what +
                           ": the store's protocol (comm/gate/store_protocol.h) does not carry it. Store large "
                           "data in files or send it with collectives, not through the store");
  };
  if (request.keys.size() > sp::kMaxKeysPerRequest || request.values.size() > sp::kMaxKeysPerRequest) {
    refuse("has " + std::to_string(std::max(request.keys.size(), request.values.size())) + " keys or values (at most " +
           std::to_string(sp::kMaxKeysPerRequest) + ")");
  }
  for (const std::string& key : request.keys) {
    if (key.size() > sp::kMaxKeyBytes) {
      refuse("has a key of " + std::to_string(key.size()) + " bytes (at most " + std::to_string(sp::kMaxKeyBytes) +
             ")");
    }
  }
  for (const std::string& value : request.values) {
    if (value.size() > sp::kMaxValueBytes) {
      refuse("has a value of " + std::to_string(value.size()) + " bytes (at most " +
             std::to_string(sp::kMaxValueBytes) + ")");
    }
  }
}

}  // namespace

StoreConnection StoreConnection::connect(const std::string& host, int port, const std::string& secret,
                                         const StoreClientOptions& options) {
  check_store_secret(secret);
  const std::string gate = host + ":" + std::to_string(port);
  const std::vector<SocketAddress> addresses = resolve_tcp(host, port);
  const TimePoint give_up = Clock::now() + options.connect_timeout;
  milliseconds backoff = kFirstBackoff;
  std::string last_error = "no attempt was made";
  for (;;) {
    for (const SocketAddress& address : addresses) {
      const TimePoint now = Clock::now();
      const TimePoint attempt_deadline =
          std::min(now + kConnectAttemptTimeout, std::max(give_up, now + kLastAttemptGrace));
      std::string error;
      std::optional<Fd> fd = connect_once(address, attempt_deadline, error);
      if (!fd) {
        last_error = error;
        continue;
      }
      set_nodelay(fd->get());  // small requests, one at a time: Nagle would add a delayed ACK to each
      const HandshakeEnd end = run_handshake(fd->get(), secret, gate, options.handshake_timeout);
      if (end.done) return StoreConnection(std::move(*fd), "rank 0's store at " + gate);
      if (!end.retry) throw DistributedError("acc: " + end.error);
      last_error = end.error;
    }
    const TimePoint now = Clock::now();
    if (now >= give_up) break;
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, give_up - now));
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  throw DistributedError("acc: could not reach rank 0's store gate at " + gate + " within " +
                         duration_text(options.connect_timeout) + ": " + last_error +
                         ". Rank 0 has not started or has exited, MASTER_ADDR/MASTER_PORT point elsewhere, or "
                         "a flood of connections keeps its gate busy");
}

StoreConnection::StoreConnection(Fd fd, std::string name) : fd_(std::move(fd)), name_(std::move(name)) {
  // Non-blocking, so that every wait has a deadline (poll), whoever made the descriptor.
  set_nonblocking(fd_.get());
}

void StoreConnection::lose(const std::string& why) {
  fd_.reset();
  lost_ = "acc: " + why;
  throw StoreConnectionLost(lost_);
}

sp::Response StoreConnection::call(sp::Request request, milliseconds answer_within) {
  if (!fd_.valid()) {
    throw StoreConnectionLost(
        (lost_.empty() ? "acc: the connection to " + name_ + " is closed" : lost_) +
        " (an earlier call lost it; a store does not reconnect, since requests may have been lost with it)");
  }
  check_limits(request, name_);
  const std::string op = sp::op_name(request.op);
  request.id = ++last_id_;
  const TimePoint deadline = deadline_after(answer_within);
  auto no_answer = [&] {
    lose(name_ + " did not answer a " + op + " request within " + duration_text(answer_within) +
         ": rank 0 is stopped, overloaded or unreachable. The connection is closed");
  };
  auto ended = [&](const IoResult& io, const char* when) {
    if (io.io == Io::kError) {
      lose(name_ + " reset the connection " + when + " a " + op + " request (" + errno_text(io.error) +
           "): rank 0 has exited or failed, and its store with it");
    }
    lose(name_ + " closed the connection " + when + " a " + op +
         " request: rank 0 has exited or failed, and its store with it");
  };

  const IoResult sent = send_all(fd_.get(), sp::encode(request), deadline);
  if (sent.io == Io::kTimeout) no_answer();
  if (sent.io != Io::kOk) ended(sent, "while sending");

  std::string in;
  for (;;) {
    sp::Response response;
    std::size_t consumed = 0;
    std::size_t wanted = 0;
    std::string error;
    switch (sp::decode(in, response, consumed, wanted, error)) {
      case sp::Decoded::kDone:
        if (response.id != request.id) {
          lose(name_ + " answered request #" + std::to_string(response.id) + " when this rank's " + op +
               " request was #" + std::to_string(request.id) + ": the connection is out of step");
        }
        return response;
      case sp::Decoded::kBad:
        lose(name_ + " answered a " + op + " request with a malformed frame (" + error +
             "): it does not speak this acc version's store protocol");
      case sp::Decoded::kIncomplete:
        break;
    }
    // The length first, then exactly the rest of the frame.
    const IoResult got = recv_until(fd_.get(), in, wanted != 0 ? wanted : sp::kLengthBytes, deadline);
    if (got.io == Io::kTimeout) no_answer();
    if (got.io != Io::kOk) ended(got, "before answering");
  }
}

}  // namespace acc::detail
