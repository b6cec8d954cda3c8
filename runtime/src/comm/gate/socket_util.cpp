#include "comm/gate/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <acc/errors.h>
#include <cerrno>
#include <cstring>

namespace acc::detail {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // never retried on EINTR: Linux frees the descriptor either way
  fd_ = fd;
}

std::vector<SocketAddress> resolve_tcp(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    throw DistributedError("acc: cannot resolve the store host '" + host + "': " + gai_strerror(rc) +
                           ". Check MASTER_ADDR (the main machine's name or address, as this machine reaches it).");
  }
  std::vector<SocketAddress> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    SocketAddress address;
    std::memcpy(&address.storage, a->ai_addr, a->ai_addrlen);
    address.length = a->ai_addrlen;
    addresses.push_back(address);
  }
  freeaddrinfo(found);
  return addresses;
}

std::string address_text(const SocketAddress& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (address.family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (address.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "?";
}

std::string peer_text(int fd) {
  SocketAddress peer;
  peer.length = sizeof(peer.storage);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer.storage), &peer.length) != 0) return "?";
  return address_text(peer);
}

int local_port(int fd) {
  SocketAddress local;
  local.length = sizeof(local.storage);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local.storage), &local.length) != 0) {
    throw Error("acc: getsockname on the store socket failed: " + errno_text(errno));
  }
  if (local.family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&local.storage)->sin_port);
  if (local.family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&local.storage)->sin6_port);
  throw Error("acc: the store socket is not a TCP socket");
}

std::string errno_text(int error) {
  char buffer[256];
  // GNU strerror_r returns the message, which may or may not be the buffer.
  return strerror_r(error, buffer, sizeof(buffer));
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    throw Error("acc: cannot make a store socket non-blocking: " + errno_text(errno));
  }
}

void set_nodelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // best effort: only latency suffers
}

}  // namespace acc::detail
