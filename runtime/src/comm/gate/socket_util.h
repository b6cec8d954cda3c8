#pragma once
// Small POSIX socket helpers of the store gate and its clients (comm/gate/store_gate.h,
// comm/gate/store_client.h): an owning descriptor, name resolution, addresses as text. Torch-free.
#include <sys/socket.h>

#include <string>
#include <utility>
#include <vector>

namespace acc::detail {

/// Owns a file descriptor; closes it when destroyed or reset.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  int family() const { return storage.ss_family; }
};

/// The TCP addresses of host:port (names resolved once, IPv4 and IPv6). Throws acc::DistributedError
/// naming the host when it does not resolve.
std::vector<SocketAddress> resolve_tcp(const std::string& host, int port);

/// "1.2.3.4:5", "[::1]:5".
std::string address_text(const SocketAddress& address);
/// The other end of a connected socket as text ("?" if unknown).
std::string peer_text(int fd);
/// The port a socket is bound to; throws acc::Error if it has none.
int local_port(int fd);

/// strerror as a std::string.
std::string errno_text(int error);

void set_nonblocking(int fd);
/// TCP_NODELAY: the store speaks in small requests; Nagle's algorithm adds up to
/// 40 ms (a delayed ACK) to each.
void set_nodelay(int fd);

}  // namespace acc::detail
