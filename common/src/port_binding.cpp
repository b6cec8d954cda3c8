#include <acc_common/port_binding.h>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

namespace acc::common {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { ::freeaddrinfo(info); }
};

// -1 with errno set on failure.
int bind_address(const sockaddr* address, socklen_t length, int family, bool listen) {
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

}  // namespace

int bind_host(const std::string& host, int port, bool listen, int& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (status != 0) throw UnresolvedHost(::gai_strerror(status));
  std::unique_ptr<addrinfo, AddrInfoDeleter> addresses(found);
  error = EADDRNOTAVAIL;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = bind_address(a->ai_addr, a->ai_addrlen, a->ai_family, listen);
    if (fd >= 0) return fd;
    error = errno;
    if (error == EADDRINUSE) break;
  }
  return -1;
}

int bind_every_interface(int port, bool listen, int& error) {
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = bind_address(reinterpret_cast<sockaddr*>(&any), sizeof(any), AF_INET, listen);
  if (fd < 0) error = errno;
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  return 0;
}

}  // namespace acc::common
