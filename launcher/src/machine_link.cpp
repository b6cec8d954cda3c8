#include "machine_link.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <acc_common/port_binding.h>

#include "errors.h"

namespace acc::launcher {
namespace {

double seconds_between(MachineLink::Clock::time_point from, MachineLink::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

MachineLink::Clock::duration seconds(double s) {
  return std::chrono::duration_cast<MachineLink::Clock::duration>(std::chrono::duration<double>(s));
}

std::string peer_address(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  char text[NI_MAXHOST] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    getnameinfo(reinterpret_cast<sockaddr*>(&address), length, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
  return text;
}

std::string whole_seconds(double s) { return std::to_string(static_cast<long>(s + 0.5)) + " s"; }

}  // namespace

MachineLink::MachineLink(const LaunchPlan& plan, double timeout_s)
    : leader_(plan.machine_rank == 0),
      machine_rank_(plan.machine_rank),
      leader_host_(plan.master_addr),
      port_(agent_port(plan)),
      timeout_s_(timeout_s),
      interval_s_(std::max(0.1, timeout_s / 5)) {
  const auto now = Clock::now();
  next_beat_ = now;
  next_connect_ = now;
  if (!leader_) return;
  leader_attempt_ = attempt_;
  int error = 0;
  listen_fd_ = common::bind_every_interface(port_, /*listen=*/true, error);
  if (listen_fd_ < 0)
    throw UsageError("cannot listen on port " + std::to_string(port_) + " (--main_process_port + 1), where the other "
                     "machines' acc-launch report that they are alive: " + std::strerror(error) +
                     "; choose a --main_process_port whose next port is free too");
  fcntl(listen_fd_, F_SETFL, fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
}

MachineLink::~MachineLink() {
  close_listener();  // first: a machine that connects now is refused, not accepted and then reset
  for (Peer& peer : peers_)
    if (peer.fd >= 0) ::close(peer.fd);
  if (connecting_fd_ >= 0) ::close(connecting_fd_);
}

void MachineLink::close_listener() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void MachineLink::add_poll_fds(std::vector<pollfd>& fds) const {
  if (listen_fd_ >= 0) fds.push_back({listen_fd_, POLLIN, 0});
  if (connecting_fd_ >= 0) fds.push_back({connecting_fd_, POLLOUT, 0});
  for (const Peer& peer : peers_)
    if (peer.fd >= 0) fds.push_back({peer.fd, POLLIN, 0});
}

void MachineLink::service(const std::vector<pollfd>& fds, Clock::time_point now) {
  auto ready = [&fds](int fd) {
    for (const pollfd& p : fds)
      if (p.fd == fd) return p.revents != 0;
    return false;
  };
  if (listen_fd_ >= 0 && ready(listen_fd_)) accept_peer(now);
  if (connecting_fd_ >= 0 && ready(connecting_fd_)) finish_connect(now);
  for (Peer& peer : peers_)
    if (peer.fd >= 0 && ready(peer.fd)) read_peer(peer, now);
  if (!leader_ && !goodbye_ && connecting_fd_ < 0 && peers_.empty() && now >= next_connect_) start_connect(now);
  if (now >= next_beat_) {
    next_beat_ = now + seconds(interval_s_);
    for (Peer& peer : peers_)
      if (peer.fd >= 0) send_to(peer, "B " + std::to_string(leader_ ? attempt_ : -1));
  }
  for (Peer& peer : peers_) {
    if (peer.fd < 0 || peer.said_goodbye) continue;
    const double silent = seconds_between(peer.last_heard, now);
    if (silent >= timeout_s_) drop(peer, "has not answered for " + whole_seconds(silent));
  }
  peers_.erase(std::remove_if(peers_.begin(), peers_.end(), [](const Peer& p) { return p.fd < 0; }), peers_.end());
}

double MachineLink::seconds_to_next_duty(Clock::time_point now) const {
  double next = seconds_between(now, next_beat_);
  if (!leader_ && peers_.empty() && connecting_fd_ < 0) next = std::min(next, seconds_between(now, next_connect_));
  for (const Peer& peer : peers_)
    if (peer.fd >= 0 && !peer.said_goodbye) next = std::min(next, timeout_s_ - seconds_between(peer.last_heard, now));
  return std::max(0.0, next);
}

void MachineLink::forget_losses() { lost_.reset(); }

void MachineLink::say_goodbye() {
  goodbye_ = true;
  // Machine 0's ranks ended: no machine joins any more. Stop listening before the goodbye, so that a
  // machine whose ranks still run and that connects again after it is refused and keeps trying; a
  // connection accepted by the kernel while this launcher exits would be reset instead.
  close_listener();
  for (Peer& peer : peers_)
    if (peer.fd >= 0) send_to(peer, "Q");
}

void MachineLink::announce_failure() {
  for (Peer& peer : peers_)
    if (peer.fd >= 0) send_to(peer, "F " + std::to_string(attempt_));
}

void MachineLink::accept_peer(Clock::time_point now) {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    Peer peer;
    peer.fd = fd;
    peer.address = peer_address(fd);
    peer.last_heard = now;
    peers_.push_back(std::move(peer));
    send_to(peers_.back(), "B " + std::to_string(attempt_));
  }
}

void MachineLink::start_connect(Clock::time_point now) {
  // Machine 0's launcher may start a little later: retry soon, so that the ranks do not wait a beat.
  next_connect_ = now + seconds(std::min(interval_s_, 0.25));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(leader_host_.c_str(), std::to_string(port_).c_str(), &hints, &found) != 0 || found == nullptr) return;
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd >= 0 && (::connect(fd, found->ai_addr, found->ai_addrlen) == 0 || errno == EINPROGRESS)) {
    connecting_fd_ = fd;
  } else if (fd >= 0) {
    ::close(fd);
  }
  freeaddrinfo(found);
}

void MachineLink::finish_connect(Clock::time_point now) {
  int error = 0;
  socklen_t length = sizeof error;
  const int fd = connecting_fd_;
  connecting_fd_ = -1;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
    ::close(fd);  // machine 0's launcher is not listening yet: try again at the next interval
    return;
  }
  // Machine 0's link once machine 0 has spoken on it (its launcher sends its attempt as it accepts).
  // Until then a connection it drops is not a loss: one the kernel accepted while machine 0's
  // launcher exited is reset without a word, and is tried again as a refused one is.
  Peer peer;
  peer.fd = fd;
  peer.address = leader_host_;
  peer.last_heard = now;
  peers_.push_back(std::move(peer));
  send_to(peers_.back(), "H " + std::to_string(machine_rank_));
}

void MachineLink::read_peer(Peer& peer, Clock::time_point now) {
  char buffer[512];
  const ssize_t got = ::recv(peer.fd, buffer, sizeof buffer, 0);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (got <= 0) {
    if (peer.said_goodbye || goodbye_) {
      ::close(peer.fd);
      peer.fd = -1;
    } else {
      drop(peer, "closed the connection without ending its ranks (its acc-launch was killed or its machine restarted)");
    }
    return;
  }
  peer.last_heard = now;
  peer.pending.append(buffer, static_cast<size_t>(got));
  if (peer.pending.size() > 4096) return drop(peer, "sent something that is not acc-launch's heartbeat");
  for (size_t end; (end = peer.pending.find('\n')) != std::string::npos;) {
    const std::string line = peer.pending.substr(0, end);
    peer.pending.erase(0, end + 1);
    handle_line(peer, line);
    if (peer.fd < 0) return;
  }
}

void MachineLink::handle_line(Peer& peer, const std::string& line) {
  if (line == "Q") {
    peer.said_goodbye = true;
  } else if (line.rfind("H ", 0) == 0 && leader_) {
    peer.machine = std::atoi(line.c_str() + 2);
    // A machine that comes back replaces its old connection.
    for (Peer& other : peers_)
      if (&other != &peer && other.fd >= 0 && other.machine == peer.machine) {
        ::close(other.fd);
        other.fd = -1;
      }
  } else if (line.rfind("F ", 0) == 0) {
    // Only the attempt this machine runs: a report that crossed a restart is old news.
    if (std::atoi(line.c_str() + 2) == attempt_ && !lost_) lost_ = name(peer) + " reported that a rank failed there";
  } else if (line.rfind("B ", 0) == 0) {
    if (!leader_) {
      if (peer.machine < 0) {  // machine 0's first word on this connection: now it is its link
        peer.machine = 0;
        ++connections_;
      }
      leader_attempt_ = std::atoi(line.c_str() + 2);
    }
  } else {
    drop(peer, "sent something that is not acc-launch's heartbeat");
  }
}

void MachineLink::send_to(Peer& peer, const std::string& line) {
  const std::string message = line + "\n";
  // Never blocks: a peer whose link is down fills its buffer, and its silence is noticed by the deadline.
  (void)::send(peer.fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void MachineLink::drop(Peer& peer, const std::string& why) {
  ::close(peer.fd);
  peer.fd = -1;
  if (!leader_) leader_attempt_.reset();  // a new connection tells it again
  // A connection that never said hello is not one of the job's machines (a port scan): not a loss.
  if (!lost_ && peer.machine >= 0) lost_ = name(peer) + " " + why;
}

std::string MachineLink::name(const Peer& peer) const {
  const std::string who = peer.machine >= 0 ? "machine " + std::to_string(peer.machine) : "a machine";
  return who + " (" + peer.address + ")";
}

}  // namespace acc::launcher
