#include "ports.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <acc/environment.h>

#include "errors.h"

namespace acc::launcher {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { ::freeaddrinfo(info); }
};

// SO_REUSEADDR so that connections of a previous run in TIME_WAIT do not count as "in use"; a live
// listener still does. Returns the descriptor (listening when `listen`), or -1 with errno set.
int bind_port(const sockaddr* address, socklen_t length, int family, bool listen) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, address, length) != 0 || (listen && ::listen(fd, SOMAXCONN) != 0)) {
    const int error = errno;
    ::close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

// Binds host:port; -1 with errno (EADDRNOTAVAIL when the host is not this machine's).
int bind_host(const std::string& host, int port, bool listen) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (status != 0)
    throw UsageError("the main process address '" + host + "' (--main_process_ip) does not resolve: " +
                     ::gai_strerror(status));
  std::unique_ptr<addrinfo, AddrInfoDeleter> addresses(found);
  int error = EADDRNOTAVAIL;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = bind_port(a->ai_addr, a->ai_addrlen, a->ai_family, listen);
    if (fd >= 0) return fd;
    error = errno;
    if (error == EADDRINUSE) break;
  }
  errno = error;
  return -1;
}

int bind_any(int port, bool listen) {
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = htons(static_cast<uint16_t>(port));
  return bind_port(reinterpret_cast<sockaddr*>(&any), sizeof(any), AF_INET, listen);
}

// The address itself, or every interface when it is not this machine's.
int bind_rendezvous(LaunchPlan& plan, int port, bool listen) {
  const int fd = bind_host(plan.master_addr, port, listen);
  if (fd >= 0 || errno != EADDRNOTAVAIL) return fd;
  const int any = bind_any(port, listen);
  if (any >= 0)
    plan.notes.push_back("the main process address " + plan.master_addr +
                         " is not an address of this machine (NAT?); the rendezvous listens on every interface");
  return any;
}

}  // namespace

StoreSocket& StoreSocket::operator=(StoreSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

StoreSocket::~StoreSocket() {
  if (fd_ >= 0) ::close(fd_);
}

int StoreSocket::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

StoreSocket reserve_store_socket(LaunchPlan& plan, bool listen) {
  if (plan.machine_rank != 0) return {};
  if (plan.world_size == 1 && !plan.port_given) return {};  // nothing rendezvouses
  int fd = bind_rendezvous(plan, plan.master_port, listen);
  if (fd < 0 && errno == EADDRINUSE && plan.master_port != 0) {
    if (plan.port_given || plan.num_machines > 1)
      throw UsageError("port " + std::to_string(plan.master_port) +
                       " (--main_process_port) is already in use on this machine; choose another with "
                       "--main_process_port N, or --main_process_port 0 for a free one");
    const int taken = plan.master_port;
    fd = bind_rendezvous(plan, 0, listen);
    if (fd >= 0)
      plan.notes.push_back("the default port " + std::to_string(taken) + " is in use; using free port " +
                           std::to_string(bound_port(fd)) + " (choose one with --main_process_port)");
  }
  if (fd < 0)
    throw UsageError("cannot reserve the rendezvous port " + plan.master_addr + ":" +
                     std::to_string(plan.master_port) + " (" + std::strerror(errno) +
                     "); give another with --main_process_ip / --main_process_port");
  plan.master_port = bound_port(fd);
  return StoreSocket(fd);
}

std::string new_job_id() {
  unsigned char bytes[8] = {};
  if (::getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes)))
    throw UsageError(std::string("cannot make a job id: getrandom: ") + std::strerror(errno));
  char text[2 * sizeof(bytes) + 1];
  for (size_t i = 0; i < sizeof(bytes); ++i) std::snprintf(text + 2 * i, 3, "%02x", bytes[i]);
  return text;
}

}  // namespace acc::launcher
