#include "comm/gate/store_server.h"

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
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "comm/gate/key_value_table.h"
#include "comm/gate/store_protocol.h"

namespace acc::detail {

namespace sp = store_protocol;

namespace {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
// Accepts per wake-up of the listener, so that the handshakes of connections already accepted are
// read between batches of a flood (the listener is level-triggered: the rest come next turn).
constexpr int kAcceptBatch = 64;

// epoll tags: the listener, the wake-up eventfd, and session ids (from 2).
constexpr uint64_t kListenerTag = 0;
constexpr uint64_t kWakeTag = 1;

enum class Phase { kHandshake, kServing };

struct Session {
  uint64_t id = 0;
  std::string peer;
  std::string address;           // the peer's host part: what the per-address cap counts
  bool unauthenticated = false;  // counted by the shedding policy
  Fd fd;
  uint32_t registered = 0;  // the epoll interest; 0: not in the epoll set
  Phase phase = Phase::kHandshake;
  bool closed = false;
  std::unique_ptr<Handshake> handshake;
  std::string handshake_in;  // what it has read of its next message
  std::string in;            // serving: bytes read and not yet consumed as requests
  std::size_t in_wanted = 0;  // the size of the frame being read, once its length is known
  std::string out;           // handshake replies and answers not yet written
  std::size_t out_offset = 0;
  std::optional<sp::Request> parked;  // a request waiting for `waits_for`
  std::string waits_for;
  TimePoint deadline = TimePoint::max();
  bool has_out() const { return out_offset < out.size(); }
};

bool would_block(int error) { return error == EAGAIN || error == EWOULDBLOCK; }

// "1.2.3.4:5" -> "1.2.3.4", "[::1]:5" -> "[::1]".
std::string host_of(const std::string& peer) { return peer.substr(0, peer.rfind(':')); }

// A cap lowered, if need be, to a quarter of the descriptors this process may open (but not below
// 8): the rest are Gloo's, NCCL's and the program's.
std::size_t fit_descriptors(std::size_t cap) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return cap;
  return std::min(cap, std::max<std::size_t>(8, static_cast<std::size_t>(limit.rlim_cur / 4)));
}

sp::Response timed_out(const sp::Request& request) {
  sp::Response response;
  response.id = request.id;
  response.status = sp::Status::kTimeout;
  return response;
}

}  // namespace

struct StoreServer::Impl {
  explicit Impl(StoreServerConfig c) : config(std::move(c)) {}

  StoreServerConfig config;
  Fd epoll;
  Fd wake;
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> live{0};
  std::atomic<std::size_t> parked_count{0};
  std::atomic<std::size_t> key_count{0};
  std::unordered_map<uint64_t, std::unique_ptr<Session>> sessions;
  std::multimap<TimePoint, uint64_t> timers;  // stale entries (deadline moved on) are skipped
  uint64_t next_id = 2;
  KeyValueTable table;
  std::unordered_map<std::string, std::set<uint64_t>> waiters;  // key -> sessions parked on it
  std::deque<uint64_t> runnable;  // sessions whose parked request may go on now
  // The connections in their handshake, oldest (lowest id) first, in all and by address.
  std::set<uint64_t> waiting_proof;
  std::unordered_map<std::string, std::set<uint64_t>> waiting_proof_by_address;
  std::size_t max_waiting = 0;
  std::size_t max_waiting_per_address = 0;
  bool listener_registered = false;
  TimePoint accept_paused_until{};
  // adopt_local(): descriptors handed over from other threads.
  std::mutex adopted_mutex;
  std::vector<int> adopted;
  bool stopped = false;  // under adopted_mutex: the loop takes no more

  void run();

  // --- events and bookkeeping ---
  void report(StoreServerEvent::Kind kind, const std::string& peer, const std::string& text) {
    if (!config.on_event) return;
    try {
      config.on_event(StoreServerEvent{kind, peer, text});
    } catch (...) {  // the owner's hook must not take the loop down
    }
  }
  void fail(Session& s, StoreServerEvent::Kind kind, const std::string& text) {
    report(kind, s.peer, text);
    s.closed = true;
  }
  // Not the peer's doing (bad_alloc, no random bytes, epoll full).
  void fail_unexpected(Session& s, const std::string& what) {
    fail(s, s.phase == Phase::kServing ? StoreServerEvent::Kind::kLoopFailed : StoreServerEvent::Kind::kHandshakeFailed,
         "acc: " + config.thread_name + " failed: " + what);
  }
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
  void set_deadline(Session& s, TimePoint when) {
    s.deadline = when;
    if (when != TimePoint::max()) timers.emplace(when, s.id);
  }
  Session& add_session(Fd fd, std::string peer, Phase phase);
  void shed(uint64_t id, const std::string& why);
  void make_room(const std::string& address);

  // --- the handshake ---
  void start_handshake(Session& s) {
    s.phase = Phase::kHandshake;
    s.handshake = config.make_handshake();
    s.out = s.handshake->opening();
    s.out_offset = 0;
    set_deadline(s, Clock::now() + config.handshake_timeout);
    flush(s);
  }
  void read_handshake(Session& s);
  void handshake_step(Session& s);

  // --- serving ---
  void read_requests(Session& s);
  void serve(Session& s);
  void execute(Session& s, const sp::Request& request);
  void answer(Session& s, const sp::Response& response);
  void park(Session& s, sp::Request request, std::string key);
  void unpark(Session& s);
  void wake_waiters(const std::vector<std::string>& keys);
  void run_runnable();

  // --- I/O ---
  void flush(Session& s);
  void handle(Session& s, uint32_t events);
  void on_deadline(Session& s);
  void settle(Session& s);
  void update_interest(Session& s);
  void update_listener();
  void accept_all();
  void take_adopted();
  void expire_timers();
  int next_timeout_ms() const;
};

// --- sessions -------------------------------------------------------------------------------------

Session& StoreServer::Impl::add_session(Fd fd, std::string peer, Phase phase) {
  auto owned = std::make_unique<Session>();
  Session& s = *owned;
  s.id = next_id++;
  s.peer = std::move(peer);
  s.address = host_of(s.peer);
  s.fd = std::move(fd);
  s.phase = phase;
  sessions.emplace(s.id, std::move(owned));
  ++live;
  return s;
}

// Closes a connection that has not finished its handshake, reported as refused.
void StoreServer::Impl::shed(uint64_t id, const std::string& why) {
  const auto found = sessions.find(id);
  if (found == sessions.end()) return;
  Session& s = *found->second;
  fail(s, StoreServerEvent::Kind::kHandshakeFailed, why);
  settle(s);
}

// Before adding a connection from `address`: the oldest unfinished handshakes go first when a cap
// is reached, of that address when it holds its share, else of any.
void StoreServer::Impl::make_room(const std::string& address) {
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

// --- the handshake --------------------------------------------------------------------------------

void StoreServer::Impl::read_handshake(Session& s) {
  // Exactly the bytes of the next message, never more: what follows is the first request.
  while (!s.closed && s.phase == Phase::kHandshake) {
    char buffer[128];
    const std::size_t want = std::min(s.handshake->needed() - s.handshake_in.size(), sizeof(buffer));
    const ssize_t n = recv(s.fd.get(), buffer, want, 0);
    if (n > 0) {
      s.handshake_in.append(buffer, static_cast<std::size_t>(n));
      if (s.handshake_in.size() == s.handshake->needed()) handshake_step(s);
    } else if (n == 0) {
      fail(s, StoreServerEvent::Kind::kHandshakeFailed, s.handshake->failure_on_close(s.handshake_in.size()));
    } else if (errno == EINTR) {
      continue;
    } else if (would_block(errno)) {
      return;
    } else {
      fail(s, StoreServerEvent::Kind::kHandshakeFailed,
           s.handshake->failure_on_close(s.handshake_in.size()) + " (" + errno_text(errno) + ")");
    }
  }
}

void StoreServer::Impl::handshake_step(Session& s) {
  Handshake::Step step = s.handshake->consume(s.handshake_in);
  s.handshake_in.clear();
  switch (step.state) {
    case Handshake::State::kMore:
      s.out += step.reply;
      flush(s);
      return;
    case Handshake::State::kFailed:
      if (!step.reply.empty()) {  // best effort: it fits an empty socket buffer, the peer may be gone
        (void)send(s.fd.get(), step.reply.data(), step.reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      fail(s, StoreServerEvent::Kind::kHandshakeFailed, step.error);
      return;
    case Handshake::State::kDone:
      remove_waiting(s);
      report(StoreServerEvent::Kind::kHandshakeSucceeded, s.peer, {});
      s.out += step.reply;
      s.handshake.reset();
      s.phase = Phase::kServing;
      s.deadline = TimePoint::max();
      flush(s);
      return;
  }
}

// --- serving --------------------------------------------------------------------------------------

void StoreServer::Impl::read_requests(Session& s) {
  // Only what the frame being read still needs (then serve() takes it): a client holds at most one
  // request here, however much it sends.
  for (;;) {
    const std::size_t need = s.in_wanted > s.in.size() ? s.in_wanted - s.in.size() : sp::kLengthBytes;
    const std::size_t chunk = std::min(need, kReadChunk);
    const std::size_t before = s.in.size();
    s.in.resize(before + chunk);
    const ssize_t n = recv(s.fd.get(), s.in.data() + before, chunk, 0);
    s.in.resize(before + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
    if (n == 0) {  // the client is done with the store (or gone): nothing is owed to it
      s.closed = true;
      return;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      if (!would_block(errno)) s.closed = true;  // ECONNRESET and the like
      return;
    }
    sp::Request request;
    std::size_t consumed = 0;
    std::string error;
    switch (sp::decode(s.in, request, consumed, s.in_wanted, error)) {
      case sp::Decoded::kIncomplete:
        continue;
      case sp::Decoded::kBad:
        fail(s, StoreServerEvent::Kind::kProtocolError,
             "an authenticated connection sent a malformed store request (" + error + "); it was closed");
        return;
      case sp::Decoded::kDone:
        s.in.erase(0, consumed);
        s.in_wanted = 0;
        execute(s, request);
        return;  // one request at a time: the next is read once this one is answered
    }
  }
}

void StoreServer::Impl::execute(Session& s, const sp::Request& request) {
  KeyValueTable::Outcome outcome = table.execute(request);
  key_count = table.size();
  if (!outcome.response) {
    park(s, request, std::move(outcome.waits_for));
    return;
  }
  answer(s, *outcome.response);
  if (!outcome.written.empty()) wake_waiters(outcome.written);
}

void StoreServer::Impl::answer(Session& s, const sp::Response& response) {
  s.out += sp::encode(response);
  flush(s);
}

void StoreServer::Impl::park(Session& s, sp::Request request, std::string key) {
  const bool first = !s.parked;
  if (first) {
    ++parked_count;
    const int64_t ms = request.number;
    set_deadline(s, ms > 0 ? Clock::now() + std::chrono::milliseconds(ms) : TimePoint::max());
  }
  waiters[key].insert(s.id);
  s.waits_for = std::move(key);
  s.parked = std::move(request);
}

void StoreServer::Impl::unpark(Session& s) {
  if (!s.parked) return;
  const auto found = waiters.find(s.waits_for);
  if (found != waiters.end()) {
    found->second.erase(s.id);
    if (found->second.empty()) waiters.erase(found);
  }
  s.parked.reset();
  s.waits_for.clear();
  s.deadline = TimePoint::max();
  --parked_count;
}

void StoreServer::Impl::wake_waiters(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    const auto found = waiters.find(key);
    if (found == waiters.end()) continue;
    for (uint64_t id : found->second) runnable.push_back(id);
    waiters.erase(found);
  }
}

// Parked requests whose key was written try again; what they write may wake others in turn (a
// queue, not recursion: a chain of waiters cannot grow the stack).
void StoreServer::Impl::run_runnable() {
  while (!runnable.empty()) {
    const uint64_t id = runnable.front();
    runnable.pop_front();
    const auto found = sessions.find(id);
    if (found == sessions.end()) continue;
    Session& s = *found->second;
    if (!s.parked || s.closed) continue;
    try {
      sp::Request request = std::move(*s.parked);
      KeyValueTable::Outcome outcome = table.execute(request);
      if (outcome.response) {
        s.waits_for.clear();  // the waiters entry was taken by wake_waiters
        unpark(s);
        answer(s, *outcome.response);
        serve(s);
      } else {
        s.parked = std::move(request);
        waiters[outcome.waits_for].insert(s.id);
        s.waits_for = std::move(outcome.waits_for);
      }
    } catch (const std::exception& e) {
      fail_unexpected(s, e.what());
    }
    settle(s);
  }
}

// Reads and runs the connection's next request once its last answer is out.
void StoreServer::Impl::serve(Session& s) {
  if (!s.closed && s.phase == Phase::kServing && !s.parked && !s.has_out()) read_requests(s);
}

// --- I/O ------------------------------------------------------------------------------------------

void StoreServer::Impl::flush(Session& s) {
  while (s.has_out()) {
    const ssize_t n = send(s.fd.get(), s.out.data() + s.out_offset, s.out.size() - s.out_offset, MSG_NOSIGNAL);
    if (n > 0) {
      s.out_offset += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && would_block(errno)) {
      return;
    } else {
      s.closed = true;  // the peer reset or vanished
      return;
    }
  }
  std::string().swap(s.out);  // an idle connection holds no buffer
  s.out_offset = 0;
}

void StoreServer::Impl::handle(Session& s, uint32_t events) {
  try {
    if ((events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0 && s.has_out()) flush(s);
    if (s.closed) return;
    if (s.parked) {
      // Not read while it waits; a client gone meanwhile releases its wait.
      if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) s.closed = true;
      return;
    }
    if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) == 0) return;
    if (s.phase == Phase::kHandshake) read_handshake(s);
    serve(s);
  } catch (const std::exception& e) {  // bad_alloc, a handshake that cannot get random bytes
    fail_unexpected(s, e.what());
  }
}

void StoreServer::Impl::on_deadline(Session& s) {
  if (s.phase == Phase::kHandshake) {
    fail(s, StoreServerEvent::Kind::kHandshakeFailed,
         s.handshake->failure_on_timeout(config.handshake_timeout, s.handshake_in.size()));
    return;
  }
  if (!s.parked) return;
  const sp::Request request = std::move(*s.parked);
  unpark(s);
  answer(s, timed_out(request));
  serve(s);
}

// After anything happened to a connection: close it when it failed, else set what epoll watches.
void StoreServer::Impl::settle(Session& s) {
  if (!s.closed) update_interest(s);
  if (s.closed) {
    remove_waiting(s);
    unpark(s);
    --live;
    sessions.erase(s.id);  // closes the socket, which leaves the epoll set
  }
}

void StoreServer::Impl::update_interest(Session& s) {
  uint32_t want = 0;
  if (s.has_out()) want |= EPOLLOUT;
  // Read while handshaking, or serving with nothing owed; a parked client is watched too (with
  // EPOLLRDHUP) so that one that goes away releases its wait.
  if (s.phase == Phase::kHandshake || (!s.has_out() && !s.parked)) want |= EPOLLIN;
  if (s.parked) want |= EPOLLRDHUP;
  if (want == s.registered) return;
  epoll_event event{};
  event.events = want;
  event.data.u64 = s.id;
  const int op = want == 0 ? EPOLL_CTL_DEL : (s.registered == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD);
  if (epoll_ctl(epoll.get(), op, s.fd.get(), &event) != 0) {
    s.registered = 0;
    if (want != 0) fail_unexpected(s, "epoll_ctl: " + errno_text(errno));  // ENOMEM: give it up, not hang it
    return;
  }
  s.registered = want;
}

// --- accepting ------------------------------------------------------------------------------------

void StoreServer::Impl::update_listener() {
  const bool want = Clock::now() >= accept_paused_until;
  if (want == listener_registered) return;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kListenerTag;
  if (epoll_ctl(epoll.get(), want ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, config.listener.get(), &event) == 0) {
    listener_registered = want;
  }
}

void StoreServer::Impl::accept_all() {
  for (int accepted = 0; accepted < kAcceptBatch; ++accepted) {
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
          if (!waiting_proof.empty()) {  // free a descriptor for the newcomer
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
    std::string peer = peer_text(fd);
    make_room(host_of(peer));
    Session& s = add_session(std::move(connection), std::move(peer), Phase::kHandshake);
    add_waiting(s);
    try {
      start_handshake(s);
    } catch (const std::exception& e) {
      fail_unexpected(s, e.what());
    }
    settle(s);
  }
}

void StoreServer::Impl::take_adopted() {
  uint64_t drained = 0;
  while (read(wake.get(), &drained, sizeof(drained)) < 0 && errno == EINTR) {
  }
  std::vector<int> fds;
  {
    const std::lock_guard<std::mutex> lock(adopted_mutex);
    fds.swap(adopted);
  }
  for (int fd : fds) {
    Fd owned(fd);
    set_nonblocking(fd);
    Session& s = add_session(std::move(owned), "this process (rank 0)", Phase::kServing);
    settle(s);
  }
}

// --- the loop -------------------------------------------------------------------------------------

void StoreServer::Impl::expire_timers() {
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

int StoreServer::Impl::next_timeout_ms() const {
  TimePoint next = TimePoint::max();
  if (!timers.empty()) next = timers.begin()->first;
  if (!listener_registered) next = std::min(next, accept_paused_until);
  if (next == TimePoint::max()) return -1;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now()).count();
  return static_cast<int>(std::clamp<decltype(wait)>(wait, 0, 60'000));
}

void StoreServer::Impl::run() {
  pthread_setname_np(pthread_self(), config.thread_name.substr(0, 15).c_str());
  try {
    std::vector<epoll_event> events(256);
    while (!stop.load()) {
      update_listener();
      const int n = epoll_wait(epoll.get(), events.data(), static_cast<int>(events.size()), next_timeout_ms());
      if (n < 0) {
        if (errno == EINTR) continue;
        report(StoreServerEvent::Kind::kLoopFailed, {}, "epoll_wait: " + errno_text(errno));
        break;
      }
      for (int i = 0; i < n && !stop.load(); ++i) {
        const uint64_t tag = events[i].data.u64;
        if (tag == kWakeTag) {
          take_adopted();
          continue;
        }
        if (tag == kListenerTag) {
          accept_all();
          continue;
        }
        // A connection closed earlier in this batch has left the map; its events are dropped.
        const auto found = sessions.find(tag);
        if (found == sessions.end()) continue;
        Session& s = *found->second;
        handle(s, events[i].events);
        settle(s);
        run_runnable();
      }
      expire_timers();
      run_runnable();
    }
  } catch (const std::exception& e) {
    report(StoreServerEvent::Kind::kLoopFailed, {}, e.what());
  }
  {
    const std::lock_guard<std::mutex> lock(adopted_mutex);
    stopped = true;
    for (int fd : adopted) ::close(fd);
    adopted.clear();
  }
  waiters.clear();
  sessions.clear();  // closes every connection; the peers see them closed
  live = 0;
  parked_count = 0;
}

StoreServer::StoreServer(StoreServerConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {
  Impl& impl = *impl_;
  const int listener = impl.config.listener.get();
  int listening = 0;
  socklen_t length = sizeof(listening);
  if (getsockopt(listener, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || listening == 0) {
    throw Error("acc: descriptor " + std::to_string(listener) +
                " given to the store gate is not a listening socket; pass a socket after bind() and listen()");
  }
  if (!impl.config.make_handshake) throw Error("acc: internal error: a store server needs a handshake");
  set_nonblocking(listener);
  impl.epoll = Fd(epoll_create1(EPOLL_CLOEXEC));
  impl.wake = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl.epoll.valid() || !impl.wake.valid()) {
    throw Error("acc: cannot create the store server's epoll/eventfd: " + errno_text(errno));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeTag;
  if (epoll_ctl(impl.epoll.get(), EPOLL_CTL_ADD, impl.wake.get(), &event) != 0) {
    throw Error("acc: cannot watch the store server's eventfd: " + errno_text(errno));
  }
  impl.max_waiting = fit_descriptors(std::max<std::size_t>(1, impl.config.max_unauthenticated));
  impl.max_waiting_per_address =
      std::min(impl.max_waiting, std::max<std::size_t>(1, impl.config.max_unauthenticated_per_address));
  thread_ = std::thread([&impl] { impl.run(); });
}

StoreServer::~StoreServer() {
  impl_->stop = true;
  const uint64_t one = 1;
  while (write(impl_->wake.get(), &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  thread_.join();
}

Fd StoreServer::adopt_local() {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
    throw Error("acc: cannot make a connection to rank 0's own store (socketpair: " + errno_text(errno) + ")");
  }
  Fd mine(pair[0]);
  Fd theirs(pair[1]);
  {
    const std::lock_guard<std::mutex> lock(impl_->adopted_mutex);
    if (impl_->stopped || impl_->stop.load()) {
      throw Error("acc: rank 0's store has stopped; no new connection to it can be made");
    }
    impl_->adopted.push_back(theirs.release());
  }
  const uint64_t one = 1;
  while (write(impl_->wake.get(), &one, sizeof(one)) < 0 && errno == EINTR) {
  }
  return mine;
}

std::size_t StoreServer::connections() const { return impl_->live.load(); }
std::size_t StoreServer::parked() const { return impl_->parked_count.load(); }
std::size_t StoreServer::keys() const { return impl_->key_count.load(); }

}  // namespace acc::detail
