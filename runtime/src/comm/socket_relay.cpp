#include "comm/socket_relay.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <acc/errors.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <set>
#include <unordered_map>

namespace acc::detail {

namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

constexpr std::size_t kChunk = 256 * 1024;
constexpr int kReadsPerEvent = 4;  // then let the other connections have a turn
constexpr auto kConnectAttemptTimeout = std::chrono::seconds(10);
// An attempt started just before the give-up time still gets this long to be refused or accepted
// (on loopback a refusal can come after connect() returned EINPROGRESS).
constexpr auto kLastAttemptGrace = std::chrono::milliseconds(200);
constexpr auto kFirstBackoff = std::chrono::milliseconds(50);
constexpr auto kMaxBackoff = std::chrono::milliseconds(1000);
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
// Accepts per wake-up of the listener, so that the handshakes of connections already accepted are
// read between batches of a flood (the listener is level-triggered: the rest come next turn).
constexpr int kAcceptBatch = 64;

// epoll tags: the listener, the wake-up eventfd, and (id << 1) | leg for connections (ids from 1).
constexpr uint64_t kListenerTag = 0;
constexpr uint64_t kWakeTag = 1;

enum Leg : int { kA = 0, kB = 1 };  // kA: the accepted connection, kB: the one the loop connects

enum class Phase { kConnecting, kRetryWait, kHandshake, kRelaying };

// The bytes read from one leg and not yet written to the other.
struct Direction {
  std::string pending;
  std::size_t offset = 0;
  bool eof = false;   // the source leg has sent its last byte
  bool shut = false;  // its shutdown(SHUT_WR) has been passed on
  bool has_pending() const { return offset < pending.size(); }
};

struct Session {
  uint64_t id = 0;
  std::string peer;
  std::string address;         // the peer's host part: what the per-address cap counts
  bool unauthenticated = false;  // counted by the shedding policy (in its handshake, accepted leg)
  Fd legs[2];
  uint32_t registered[2] = {0, 0};  // the epoll interest of each leg; 0: not in the epoll set
  Phase phase = Phase::kConnecting;
  bool closed = false;
  bool established = false;  // relaying (no longer counted as unestablished)
  bool connected_b = false;
  bool handshake_done = false;
  int handshake_leg = kA;
  std::unique_ptr<Handshake> handshake;
  std::string handshake_out;  // what the handshake still has to send
  std::size_t handshake_out_offset = 0;
  std::string handshake_in;  // what it has read of its next message
  Direction dir[2];          // dir[leg]: bytes from that leg to the other
  TimePoint deadline = TimePoint::max();
  TimePoint connect_give_up{};
  TimePoint attempt_started{};
  std::string last_connect_error;  // of the previous attempt
  std::size_t next_address = 0;
  Clock::duration backoff = kFirstBackoff;
};

std::string seconds_text(std::chrono::milliseconds timeout) {
  const auto ms = timeout.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms";
}

bool would_block(int error) { return error == EAGAIN || error == EWOULDBLOCK; }

// "1.2.3.4:5" -> "1.2.3.4", "[::1]:5" -> "[::1]".
std::string host_of(const std::string& peer) { return peer.substr(0, peer.rfind(':')); }

// A cap lowered, if need be, to a quarter of the descriptors this process may open (but not below
// 8): the rest are the store's, Gloo's and the program's.
std::size_t fit_descriptors(std::size_t cap) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return cap;
  return std::min(cap, std::max<std::size_t>(8, static_cast<std::size_t>(limit.rlim_cur / 4)));
}

}  // namespace

struct RelayLoop::Impl {
  explicit Impl(RelayLoopConfig c) : config(std::move(c)) {}

  RelayLoopConfig config;
  Fd epoll;
  Fd wake;
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> live{0};
  std::unordered_map<uint64_t, std::unique_ptr<Session>> sessions;
  std::multimap<TimePoint, uint64_t> timers;  // stale entries (deadline moved on) are skipped
  uint64_t next_id = 1;
  std::size_t unestablished = 0;
  // shed_unauthenticated: the connections in their handshake, oldest (lowest id) first, in all and
  // by address; and the caps that apply.
  std::set<uint64_t> waiting_proof;
  std::unordered_map<std::string, std::set<uint64_t>> waiting_proof_by_address;
  std::size_t max_waiting = 0;
  std::size_t max_waiting_per_address = 0;
  bool listener_registered = false;
  TimePoint accept_paused_until{};
  std::vector<char> scratch;

  void run();

  // --- events and bookkeeping ---
  void report(RelayEvent::Kind kind, const std::string& peer, const std::string& text) {
    if (!config.on_event) return;
    try {
      config.on_event(RelayEvent{kind, peer, text});
    } catch (...) {  // the owner's hook must not take the loop down
    }
  }
  void fail(Session& s, RelayEvent::Kind kind, const std::string& text) {
    // Reported before the connection is closed: whoever sees the close can already ask why.
    report(kind, s.peer, text);
    s.closed = true;
  }
  // Not the peer's doing (bad_alloc, no random bytes, epoll full): reported as the loop's failure
  // once relaying, else as the handshake's (the owner reports those).
  void fail_unexpected(Session& s, const std::string& what) {
    fail(s, s.established ? RelayEvent::Kind::kLoopFailed : RelayEvent::Kind::kHandshakeFailed,
         "acc: " + config.thread_name + " failed: " + what);
  }
  // Whether accepting goes on whatever the number of unfinished connections.
  bool accepts_always() const { return config.shed_unauthenticated; }
  void add_waiting(Session& s) {
    s.unauthenticated = true;
    waiting_proof.insert(s.id);
    waiting_proof_by_address[s.address].insert(s.id);
  }
  void remove_waiting(Session& s) {
    if (!s.unauthenticated) return;
    s.unauthenticated = false;
    waiting_proof.erase(s.id);
    const auto found = waiting_proof_by_address.find(s.address);
    if (found != waiting_proof_by_address.end()) {
      found->second.erase(s.id);
      if (found->second.empty()) waiting_proof_by_address.erase(found);
    }
  }
  void shed(uint64_t id, const std::string& why);
  void make_room(const std::string& address);
  void set_deadline(Session& s, TimePoint when) {
    s.deadline = when;
    timers.emplace(when, s.id);
  }

  // --- phases ---
  void begin(Session& s) {
    if (s.handshake_leg == kA) {
      start_handshake(s);
    } else {
      start_connect(s);
    }
  }
  void start_handshake(Session& s) {
    s.phase = Phase::kHandshake;
    s.handshake = config.make_handshake();
    s.handshake_out = s.handshake->opening();
    s.handshake_out_offset = 0;
    set_deadline(s, Clock::now() + config.handshake_timeout);
    flush_handshake(s);
  }
  void start_connect(Session& s) {
    s.connect_give_up = Clock::now() + config.connect_timeout;
    attempt_connect(s);
  }
  void attempt_connect(Session& s);
  void attempt_failed(Session& s, const std::string& why);
  void connected(Session& s) {
    s.connected_b = true;
    if (!s.handshake_done) {
      start_handshake(s);
    } else {
      establish(s);
    }
  }
  void establish(Session& s) {
    s.phase = Phase::kRelaying;
    s.deadline = TimePoint::max();
    s.established = true;
    --unestablished;
  }
  void on_deadline(Session& s);

  // --- I/O ---
  void handle(Session& s, int leg, uint32_t events);
  void on_connect_event(Session& s);
  void flush_handshake(Session& s);
  void read_handshake(Session& s);
  void handshake_closed(Session& s, const std::string& why);
  void handshake_step(Session& s);
  void write_pending(Session& s, int source);
  void read_direction(Session& s, int source);
  void settle(Session& s);
  void update_interest(Session& s, int leg);
  void update_listener();
  void accept_all();
  void expire_timers();
  int next_timeout_ms() const;
};

// --- connecting the second leg --------------------------------------------------------------------

void RelayLoop::Impl::attempt_connect(Session& s) {
  const SocketAddress& address = config.target[s.next_address++ % config.target.size()];
  Fd fd(socket(address.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    attempt_failed(s, "socket: " + errno_text(errno));
    return;
  }
  set_nodelay(fd.get());
  if (connect(fd.get(), address.get(), address.length) == 0) {
    s.legs[kB] = std::move(fd);
    connected(s);
    return;
  }
  // A non-blocking connect interrupted by a signal goes on in the background, like EINPROGRESS.
  if (errno == EINPROGRESS || errno == EINTR) {
    s.legs[kB] = std::move(fd);
    s.registered[kB] = 0;
    s.phase = Phase::kConnecting;
    const TimePoint now = Clock::now();
    s.attempt_started = now;
    set_deadline(s, std::min(now + kConnectAttemptTimeout, std::max(s.connect_give_up, now + kLastAttemptGrace)));
    return;
  }
  attempt_failed(s, errno_text(errno));
}

void RelayLoop::Impl::attempt_failed(Session& s, const std::string& why) {
  s.legs[kB].reset();  // closing it also takes it out of the epoll set
  s.registered[kB] = 0;
  s.last_connect_error = why;
  const TimePoint now = Clock::now();
  if (config.retry_connect && now < s.connect_give_up) {  // the last wait is cut to end at the give-up time
    report(RelayEvent::Kind::kConnectRetrying, s.peer, "connecting to " + config.target_name + ": " + why);
    s.phase = Phase::kRetryWait;
    set_deadline(s, std::min(now + s.backoff, s.connect_give_up));
    s.backoff = std::min<Clock::duration>(s.backoff * 2, kMaxBackoff);
    return;
  }
  fail(s, RelayEvent::Kind::kConnectFailed,
       "could not connect to " + config.target_name +
           (config.retry_connect ? " within " + seconds_text(config.connect_timeout) : std::string()) + ": " + why);
}

void RelayLoop::Impl::on_connect_event(Session& s) {
  int error = 0;
  socklen_t length = sizeof(error);
  if (getsockopt(s.legs[kB].get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
  if (error != 0) {
    attempt_failed(s, errno_text(error));
    return;
  }
  sockaddr_storage peer{};
  socklen_t peer_length = sizeof(peer);
  if (getpeername(s.legs[kB].get(), reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) {
    if (errno == ENOTCONN) return;  // still connecting (a spurious wake-up)
    attempt_failed(s, errno_text(errno));
    return;
  }
  connected(s);
}

void RelayLoop::Impl::on_deadline(Session& s) {
  switch (s.phase) {
    case Phase::kHandshake:
      fail(s, RelayEvent::Kind::kHandshakeFailed,
           s.handshake->failure_on_timeout(config.handshake_timeout, s.handshake_in.size()));
      return;
    case Phase::kConnecting: {
      // An attempt cut short by the give-up time says less than the one before it did.
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - s.attempt_started);
      const bool cut = waited < kConnectAttemptTimeout - std::chrono::milliseconds(100);
      const auto nominal = std::chrono::duration_cast<std::chrono::milliseconds>(kConnectAttemptTimeout);
      attempt_failed(s, cut && !s.last_connect_error.empty()
                            ? s.last_connect_error
                            : "no answer within " + seconds_text(cut ? waited : nominal));
      return;
    }
    case Phase::kRetryWait:
      attempt_connect(s);
      return;
    case Phase::kRelaying:
      return;
  }
}

// --- the handshake --------------------------------------------------------------------------------

void RelayLoop::Impl::flush_handshake(Session& s) {
  const int fd = s.legs[s.handshake_leg].get();
  while (s.handshake_out_offset < s.handshake_out.size()) {
    const ssize_t n = send(fd, s.handshake_out.data() + s.handshake_out_offset,
                           s.handshake_out.size() - s.handshake_out_offset, MSG_NOSIGNAL);
    if (n > 0) {
      s.handshake_out_offset += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && would_block(errno)) {
      return;
    } else {
      handshake_closed(s, s.handshake->failure_on_close(s.handshake_in.size()) + " (" + errno_text(errno) + ")");
      return;
    }
  }
  s.handshake_out.clear();
  s.handshake_out_offset = 0;
}

// The peer closed or reset the handshake's leg. On the relay's side, after this rank's proof and
// before the gate's verdict, that is how a gate under a flood sheds a connection (a wrong secret
// gets a refusal first): connect again, as for a failed connect. Else the handshake has failed.
void RelayLoop::Impl::handshake_closed(Session& s, const std::string& why) {
  if (s.handshake_leg == kB && config.retry_connect && s.handshake && s.handshake->retry_after_close()) {
    s.handshake.reset();
    s.handshake_in.clear();
    s.handshake_out.clear();
    s.handshake_out_offset = 0;
    s.connected_b = false;
    attempt_failed(s, why);
    return;
  }
  fail(s, RelayEvent::Kind::kHandshakeFailed, why);
}

void RelayLoop::Impl::read_handshake(Session& s) {
  const int fd = s.legs[s.handshake_leg].get();
  // Exactly the bytes of the next message, never more: what follows belongs to the store and is
  // read by the relaying phase.
  while (!s.closed && s.phase == Phase::kHandshake) {
    char buffer[128];
    const std::size_t want = std::min(s.handshake->needed() - s.handshake_in.size(), sizeof(buffer));
    const ssize_t n = recv(fd, buffer, want, 0);
    if (n > 0) {
      s.handshake_in.append(buffer, static_cast<std::size_t>(n));
      if (s.handshake_in.size() == s.handshake->needed()) handshake_step(s);
    } else if (n == 0) {
      handshake_closed(s, s.handshake->failure_on_close(s.handshake_in.size()));
    } else if (errno == EINTR) {
      continue;
    } else if (would_block(errno)) {
      return;
    } else {
      handshake_closed(s, s.handshake->failure_on_close(s.handshake_in.size()) + " (" + errno_text(errno) + ")");
    }
  }
}

void RelayLoop::Impl::handshake_step(Session& s) {
  Handshake::Step step = s.handshake->consume(s.handshake_in);
  s.handshake_in.clear();
  switch (step.state) {
    case Handshake::State::kMore:
      s.handshake_out += step.reply;
      flush_handshake(s);
      return;
    case Handshake::State::kFailed:
      if (!step.reply.empty()) {  // best effort: it fits an empty socket buffer, the peer may be gone
        (void)send(s.legs[s.handshake_leg].get(), step.reply.data(), step.reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      fail(s, RelayEvent::Kind::kHandshakeFailed, step.error);
      return;
    case Handshake::State::kDone: {
      remove_waiting(s);
      report(RelayEvent::Kind::kHandshakeSucceeded, s.peer, {});
      s.handshake_done = true;
      // What the handshake still has to send goes out first on its leg, ahead of relayed bytes.
      Direction& toward = s.dir[1 - s.handshake_leg];
      toward.pending = s.handshake_out.substr(s.handshake_out_offset) + step.reply;
      toward.offset = 0;
      s.handshake_out.clear();
      s.handshake_out_offset = 0;
      s.handshake.reset();
      if (!s.connected_b) {
        start_connect(s);
      } else {
        establish(s);
      }
      return;
    }
  }
}

// --- relaying -------------------------------------------------------------------------------------

void RelayLoop::Impl::write_pending(Session& s, int source) {
  Direction& d = s.dir[source];
  const int fd = s.legs[1 - source].get();
  while (d.has_pending()) {
    const ssize_t n = send(fd, d.pending.data() + d.offset, d.pending.size() - d.offset, MSG_NOSIGNAL);
    if (n > 0) {
      d.offset += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && would_block(errno)) {
      return;
    } else {
      s.closed = true;  // the peer reset or vanished: drop both legs
      return;
    }
  }
  std::string().swap(d.pending);  // an idle connection holds no buffer
  d.offset = 0;
}

void RelayLoop::Impl::read_direction(Session& s, int source) {
  Direction& d = s.dir[source];
  const int from = s.legs[source].get();
  const int to = s.legs[1 - source].get();
  for (int reads = 0; reads < kReadsPerEvent;) {
    const ssize_t n = recv(from, scratch.data(), scratch.size(), 0);
    if (n == 0) {
      d.eof = true;
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (!would_block(errno)) s.closed = true;  // ECONNRESET and the like
      return;
    }
    ++reads;
    std::size_t sent = 0;
    while (sent < static_cast<std::size_t>(n)) {
      const ssize_t w = send(to, scratch.data() + sent, static_cast<std::size_t>(n) - sent, MSG_NOSIGNAL);
      if (w > 0) {
        sent += static_cast<std::size_t>(w);
      } else if (w < 0 && errno == EINTR) {
        continue;
      } else if (w < 0 && would_block(errno)) {
        break;
      } else {
        s.closed = true;
        return;
      }
    }
    if (sent < static_cast<std::size_t>(n)) {  // the reader is slower: keep the rest, stop reading
      d.pending.assign(scratch.data() + sent, static_cast<std::size_t>(n) - sent);
      d.offset = 0;
      return;
    }
    if (static_cast<std::size_t>(n) < scratch.size()) return;  // drained for now
  }
}

void RelayLoop::Impl::handle(Session& s, int leg, uint32_t events) {
  try {
    if (s.phase == Phase::kConnecting && leg == kB) {
      on_connect_event(s);
      return;
    }
    if (s.phase == Phase::kHandshake && leg == s.handshake_leg) {
      if ((events & EPOLLOUT) != 0) flush_handshake(s);
      if (!s.closed && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) read_handshake(s);
      return;
    }
    // Bytes waiting to go into this leg (in the gate, the handshake's last reply while the store
    // is being connected), then bytes coming out of it.
    if ((events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0 && s.dir[1 - leg].has_pending()) {
      write_pending(s, 1 - leg);
    }
    if (!s.closed && s.phase == Phase::kRelaying && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 &&
        !s.dir[leg].eof && !s.dir[leg].has_pending()) {
      read_direction(s, leg);
    }
  } catch (const std::exception& e) {  // bad_alloc, a handshake that cannot get random bytes
    fail_unexpected(s, e.what());
  }
}

// After anything happened to a connection: pass on ends of streams, close it when both directions
// ended or it failed, else set what epoll watches for it.
void RelayLoop::Impl::settle(Session& s) {
  if (!s.closed && s.phase == Phase::kRelaying) {
    for (int source : {kA, kB}) {
      Direction& d = s.dir[source];
      if (d.eof && !d.has_pending() && !d.shut) {
        shutdown(s.legs[1 - source].get(), SHUT_WR);
        d.shut = true;
      }
    }
    if (s.dir[kA].shut && s.dir[kB].shut) s.closed = true;
  }
  if (!s.closed) update_interest(s, kA);
  if (!s.closed) update_interest(s, kB);
  if (s.closed) {
    remove_waiting(s);
    if (!s.established) --unestablished;
    --live;
    sessions.erase(s.id);  // closes both legs, which leaves the epoll set
  }
}

void RelayLoop::Impl::update_interest(Session& s, int leg) {
  if (!s.legs[leg].valid()) {
    s.registered[leg] = 0;
    return;
  }
  uint32_t want = 0;
  if (s.phase == Phase::kHandshake && leg == s.handshake_leg) {
    want = EPOLLIN;
    if (s.handshake_out_offset < s.handshake_out.size()) want |= EPOLLOUT;
  } else if (s.phase == Phase::kConnecting && leg == kB) {
    want = EPOLLOUT;
  } else {
    if (s.dir[1 - leg].has_pending()) want |= EPOLLOUT;
    if (s.phase == Phase::kRelaying && !s.dir[leg].eof && !s.dir[leg].has_pending()) want |= EPOLLIN;
  }
  if (want == s.registered[leg]) return;
  // A leg with nothing to wait for leaves the set: epoll reports EPOLLHUP whatever the interest,
  // and a leg whose both directions ended would otherwise wake the loop forever.
  epoll_event event{};
  event.events = want;
  event.data.u64 = (s.id << 1) | static_cast<uint64_t>(leg);
  const int op = want == 0 ? EPOLL_CTL_DEL : (s.registered[leg] == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD);
  if (epoll_ctl(epoll.get(), op, s.legs[leg].get(), &event) != 0) {
    s.registered[leg] = 0;
    if (want != 0) fail_unexpected(s, "epoll_ctl: " + errno_text(errno));  // ENOMEM: give it up, not hang it
    return;
  }
  s.registered[leg] = want;
}

// --- accepting ------------------------------------------------------------------------------------

void RelayLoop::Impl::update_listener() {
  const bool want =
      (accepts_always() || unestablished < config.max_unestablished) && Clock::now() >= accept_paused_until;
  if (want == listener_registered) return;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kListenerTag;
  if (epoll_ctl(epoll.get(), want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, config.listener.get(), &event) == 0) {
    listener_registered = want;
  }
}

// Closes a connection that has not finished its handshake, reported as refused.
void RelayLoop::Impl::shed(uint64_t id, const std::string& why) {
  const auto found = sessions.find(id);
  if (found == sessions.end()) return;
  Session& s = *found->second;
  fail(s, RelayEvent::Kind::kHandshakeFailed, why);
  settle(s);
}

// Before adding a connection from `address`: the oldest unfinished handshakes go first when a cap
// is reached, of that address when it holds its share, else of any.
void RelayLoop::Impl::make_room(const std::string& address) {
  const auto mine = waiting_proof_by_address.find(address);
  if (mine != waiting_proof_by_address.end() && mine->second.size() >= max_waiting_per_address) {
    shed(*mine->second.begin(),
         "it had not finished the handshake when its address opened more than " +
             std::to_string(max_waiting_per_address) +
             " unauthenticated connections, and it was the oldest of them (a flood from that address?)");
  }
  while (waiting_proof.size() >= max_waiting) {
    shed(*waiting_proof.begin(), "it had not finished the handshake when more than " + std::to_string(max_waiting) +
                                     " unauthenticated connections were open, and it was the oldest (a flood?)");
  }
}

void RelayLoop::Impl::accept_all() {
  for (int accepted = 0; accepted < kAcceptBatch && (accepts_always() || unestablished < config.max_unestablished);
       ++accepted) {
    const int fd = accept4(config.listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      switch (errno) {
        case EAGAIN:
#if EAGAIN != EWOULDBLOCK
        case EWOULDBLOCK:
#endif
          return;
        // accept(2): errors of the connection that was being accepted; the next one may be fine.
        case EINTR:
        case ECONNABORTED:
        case EPROTO:
        case EPERM:
        case ENETDOWN:
        case ENOPROTOOPT:
        case EHOSTDOWN:
        case ENONET:
        case EHOSTUNREACH:
        case EOPNOTSUPP:
        case ENETUNREACH:
          continue;
        default:  // EMFILE, ENFILE, ENOBUFS, ENOMEM: level-triggered, it would fire at once again
          if (accepts_always() && !waiting_proof.empty()) {  // free a descriptor for the newcomer
            shed(*waiting_proof.begin(), "it had not finished the handshake when this process ran out of "
                                         "descriptors (" + errno_text(errno) + "), and it was the oldest");
            continue;
          }
          accept_paused_until = Clock::now() + kAcceptPause;
          return;
      }
    }
    Fd connection(fd);
    set_nodelay(fd);
    const std::string peer = peer_text(fd);
    if (config.admit) {
      std::optional<std::string> refusal;
      try {
        refusal = config.admit(fd);
      } catch (const std::exception& e) {
        refusal = e.what();
      }
      if (refusal) {
        report(RelayEvent::Kind::kNotAdmitted, peer, *refusal);
        continue;  // `connection` closes it
      }
    }
    const bool counted = accepts_always() && config.handshake_leg == RelayLoopConfig::HandshakeLeg::kAccepted;
    if (counted) make_room(host_of(peer));
    auto owned = std::make_unique<Session>();
    Session& s = *owned;
    s.id = next_id++;
    s.peer = peer;
    s.address = host_of(peer);
    s.legs[kA] = std::move(connection);
    s.handshake_leg = config.handshake_leg == RelayLoopConfig::HandshakeLeg::kAccepted ? kA : kB;
    sessions.emplace(s.id, std::move(owned));
    ++unestablished;
    ++live;
    if (counted) add_waiting(s);
    try {
      begin(s);
    } catch (const std::exception& e) {
      fail_unexpected(s, e.what());
    }
    settle(s);
  }
}

// --- the loop -------------------------------------------------------------------------------------

void RelayLoop::Impl::expire_timers() {
  const TimePoint now = Clock::now();
  while (!timers.empty() && timers.begin()->first <= now) {
    const auto [when, id] = *timers.begin();
    timers.erase(timers.begin());
    const auto found = sessions.find(id);
    if (found == sessions.end() || found->second->deadline != when) continue;
    Session& s = *found->second;
    s.deadline = TimePoint::max();
    try {
      on_deadline(s);
    } catch (const std::exception& e) {
      fail_unexpected(s, e.what());
    }
    settle(s);
  }
}

int RelayLoop::Impl::next_timeout_ms() const {
  TimePoint next = TimePoint::max();
  if (!timers.empty()) next = timers.begin()->first;
  if (!listener_registered && (accepts_always() || unestablished < config.max_unestablished)) {
    next = std::min(next, accept_paused_until);
  }
  if (next == TimePoint::max()) return -1;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
  return static_cast<int>(std::clamp<decltype(wait)>(wait, 0, 60'000));
}

void RelayLoop::Impl::run() {
  pthread_setname_np(pthread_self(), config.thread_name.substr(0, 15).c_str());
  try {
    std::vector<epoll_event> events(256);
    while (!stop.load()) {
      update_listener();
      const int n = epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()), next_timeout_ms());
      if (n < 0) {
        if (errno == EINTR) continue;
        report(RelayEvent::Kind::kLoopFailed, {}, "epoll_wait: " + errno_text(errno));
        break;
      }
      for (int i = 0; i < n && !stop.load(); ++i) {
        const uint64_t tag = events[i].data.u64;
        if (tag == kWakeTag) continue;
        if (tag == kListenerTag) {
          accept_all();
          continue;
        }
        // A connection closed earlier in this batch has left the map; its events are dropped.
        const auto found = sessions.find(tag >> 1);
        if (found == sessions.end()) continue;
        Session& s = *found->second;
        handle(s, static_cast<int>(tag & 1), events[i].events);
        settle(s);
      }
      expire_timers();
    }
  } catch (const std::exception& e) {
    report(RelayEvent::Kind::kLoopFailed, {}, e.what());
  }
  sessions.clear();  // closes every connection; the peers see them closed
  live = 0;
}

RelayLoop::RelayLoop(RelayLoopConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  Impl& impl = *impl_;
  const int listener = impl.config.listener.get();
  int listening = 0;
  socklen_t length = sizeof(listening);
  if (getsockopt(listener, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || listening == 0) {
    throw Error("acc: descriptor " + std::to_string(listener) +
                " given to the store gate is not a listening socket; pass a socket after bind() and listen()");
  }
  if (impl.config.target.empty() || !impl.config.make_handshake) {
    throw Error("acc: internal error: a relay loop needs a target and a handshake");
  }
  set_nonblocking(listener);
  impl.epoll = Fd(epoll_create1(EPOLL_CLOEXEC));
  impl.wake = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl.epoll.valid() || !impl.wake.valid()) {
    throw Error("acc: cannot create the store relay's epoll/eventfd: " + errno_text(errno));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeTag;
  if (epoll_ctl(impl.epoll.get(), EPOLL_CTL_ADD, impl.wake.get(), &event) != 0) {
    throw Error("acc: cannot watch the store relay's eventfd: " + errno_text(errno));
  }
  impl.scratch.resize(kChunk);
  impl.max_waiting = fit_descriptors(std::max<std::size_t>(1, impl.config.max_unauthenticated));
  impl.max_waiting_per_address =
      std::min(impl.max_waiting, std::max<std::size_t>(1, impl.config.max_unauthenticated_per_address));
  thread_ = std::thread([&impl] { impl.run(); });
}

RelayLoop::~RelayLoop() {
  impl_->stop = true;
  const uint64_t one = 1;
  while (write(impl_->wake.get(), &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  thread_.join();
}

std::size_t RelayLoop::connections() const { return impl_->live.load(); }

}  // namespace acc::detail
