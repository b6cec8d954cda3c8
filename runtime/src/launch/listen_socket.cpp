#include "launch/listen_socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <acc/errors.h>

#include <cerrno>
#include <cstring>

namespace acc::detail {

ReservedPort reserve_port(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw ConfigError("acc::launch: master_addr '" + host + "' does not resolve (" + ::gai_strerror(rc) +
                      "); use 127.0.0.1 (the default) or an address of this machine");
  }
  int error = 0;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    // As the TCPStore server binds: connections of an earlier job in TIME_WAIT do not block the port.
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      sockaddr_storage bound{};
      socklen_t length = sizeof(bound);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
      const int got = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                  : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      ::freeaddrinfo(found);
      return {fd, got};
    }
    error = errno;
    ::close(fd);
  }
  ::freeaddrinfo(found);
  const std::string where = host + ":" + service;
  if (error == EADDRINUSE) {
    throw ConfigError("acc::launch: port " + service + " on " + host +
                      " is in use; choose another LaunchOptions::master_port, or 0 (the default) for a "
                      "free one");
  }
  if (error == EADDRNOTAVAIL) {
    throw ConfigError("acc::launch: master_addr '" + host +
                      "' is not an address of this machine (acc::launch runs every rank here); use "
                      "127.0.0.1 (the default) or an address of this machine");
  }
  throw ConfigError("acc::launch: cannot listen on " + where + ": " + std::strerror(error) +
                    "; choose another LaunchOptions::master_addr or master_port");
}

}  // namespace acc::detail
