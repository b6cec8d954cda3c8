#pragma once
// Loopback peers for the store gate tests: blocking client sockets with timeouts (a broken gate
// fails an assertion instead of hanging the test), and listening sockets. Torch-free.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/gate/socket_util.h"

namespace acc::testing {

using detail::Fd;

inline constexpr auto kIoTimeout = std::chrono::seconds(10);

inline void set_io_timeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/// A blocking connection to 127.0.0.1:port, or -1 with errno set. Throws nothing: forked test
/// children use it.
inline int try_connect_loopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const int error = errno;
    close(fd);
    errno = error;
    return -1;
  }
  return fd;
}

/// A blocking connection to 127.0.0.1:port whose reads and writes give up after kIoTimeout.
inline Fd connect_loopback(int port) {
  Fd fd(try_connect_loopback(port));
  if (fd.get() < 0) {
    throw std::runtime_error("connect to 127.0.0.1:" + std::to_string(port) + ": " + detail::errno_text(errno));
  }
  set_io_timeout(fd.get(), kIoTimeout);
  return fd;
}

/// A socket bound to 127.0.0.1 (port 0: any) and listening, as rank 0's public socket is (which
/// has a backlog of SOMAXCONN: give it for floods, whose connections beyond the backlog would wait
/// for SYN retransmissions).
inline Fd listen_on(int port = 0, int backlog = 128) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 || listen(fd.get(), backlog) != 0) {
    throw std::runtime_error("listen on 127.0.0.1:" + std::to_string(port) + ": " + detail::errno_text(errno));
  }
  return fd;
}

inline bool send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

/// How a read ended.
enum class End { kEof, kReset, kTimeout, kError };

struct Received {
  std::string bytes;
  End end = End::kEof;
};

/// Reads until the peer closes (or resets, or kIoTimeout passes).
inline Received recv_until_end(int fd) {
  Received received;
  char buffer[65536];
  for (;;) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      received.bytes.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      received.end = End::kEof;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      received.end = End::kTimeout;
    } else if (errno == ECONNRESET) {
      received.end = End::kReset;
    } else {
      received.end = End::kError;
    }
    return received;
  }
}

/// Reads exactly n bytes; fewer if the stream ends first.
inline std::string recv_exactly(int fd, std::size_t n) {
  std::string bytes;
  char buffer[65536];
  while (bytes.size() < n) {
    const ssize_t got = recv(fd, buffer, std::min(sizeof(buffer), n - bytes.size()), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    bytes.append(buffer, static_cast<std::size_t>(got));
  }
  return bytes;
}

/// Whether the peer has closed (or reset) the connection already, without waiting.
inline bool closed_by_peer(int fd) {
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

inline std::string random_payload(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string bytes(n, '\0');
  for (std::size_t i = 0; i < n; i += 8) {
    const uint64_t word = rng();
    for (std::size_t j = 0; j < 8 && i + j < n; ++j) bytes[i + j] = static_cast<char>(word >> (8 * j));
  }
  return bytes;
}

}  // namespace acc::testing
