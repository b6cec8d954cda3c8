#include "comm/gate/store_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <acc/environment.h>
#include <acc/errors.h>
#include <acc_common/port_binding.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

namespace acc::detail {
namespace {

using Clock = std::chrono::steady_clock;

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { ::freeaddrinfo(info); }
};
using AddrInfo = std::unique_ptr<addrinfo, AddrInfoDeleter>;

std::string unresolved_message(const std::string& host, const std::string& reason) {
  return "acc: the rendezvous host MASTER_ADDR='" + host + "' does not resolve: " + reason +
         "; give an address or a name this machine can resolve";
}

AddrInfo resolve(const std::string& host, int port, int flags) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int status = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (status != 0) throw DistributedError(unresolved_message(host, ::gai_strerror(status)));
  return AddrInfo(found);
}

std::string numeric_host(const sockaddr* address, socklen_t length) {
  char host[NI_MAXHOST] = "";
  ::getnameinfo(address, length, host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
  return host;
}

// The bound port, and where this machine's own clients should connect.
ListeningSocket describe(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  ListeningSocket socket;
  socket.fd = fd;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return socket;
  if (bound.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&bound);
    socket.port = ntohs(v4->sin_port);
    socket.connect_host = v4->sin_addr.s_addr == htonl(INADDR_ANY)
                              ? "127.0.0.1"
                              : numeric_host(reinterpret_cast<sockaddr*>(&bound), length);
  } else if (bound.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&bound);
    socket.port = ntohs(v6->sin6_port);
    socket.connect_host = IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr)
                              ? "::1"
                              : numeric_host(reinterpret_cast<sockaddr*>(&bound), length);
  }
  return socket;
}

std::string taken_port_message(const std::string& where) {
  return "acc: rank 0 cannot serve the rendezvous at " + where +
         ": the port is already in use on this machine (another job, or an earlier run still "
         "ending). Choose another with MASTER_PORT or acc-launch --main_process_port (0 reserves a "
         "free one)";
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

int bind_listening(const std::string& host, int port, int& error) {
  try {
    return common::bind_host(host, port, /*listen=*/true, error);
  } catch (const common::UnresolvedHost& e) {
    throw DistributedError(unresolved_message(host, e.what()));
  }
}

ListeningSocket listen_for_store(const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  int last_error = 0;
  if (const int fd = bind_listening(host, port, last_error); fd >= 0) return describe(fd);
  if (last_error == EADDRINUSE) throw DistributedError(taken_port_message(where));
  if (last_error != EADDRNOTAVAIL) {
    throw DistributedError("acc: rank 0 cannot serve the rendezvous at " + where + ": " +
                           std::strerror(last_error));
  }
  // MASTER_ADDR names no interface of this machine: a NAT or load-balancer address that forwards
  // here. Serve on every interface, as torch does, and say why.
  const int fd = common::bind_every_interface(port, /*listen=*/true, last_error);
  if (fd < 0) {
    if (last_error == EADDRINUSE) throw DistributedError(taken_port_message(where));
    throw DistributedError("acc: rank 0 cannot serve the rendezvous at " + where + ": " +
                           std::strerror(last_error));
  }
  ListeningSocket socket = describe(fd);
  socket.fallback_reason = "MASTER_ADDR=" + host +
                           " is not an address of the machine that runs rank 0, so its store "
                           "listens on every interface; give rank 0's own address to keep it on one";
  return socket;
}

ListeningSocket adopt_listening_socket(int fd) {
  int listening = 0;
  socklen_t length = sizeof(listening);
  int type = 0;
  socklen_t type_length = sizeof(type);
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 || !listening ||
      ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_length) != 0 || type != SOCK_STREAM) {
    throw ConfigError(std::string("acc: ") + env::kStoreListenFd + "=" + std::to_string(fd) +
                      " is not a listening TCP socket in this process. The launcher passes it to "
                      "rank 0 only; unset it when starting ranks another way");
  }
  // The store must not leak into programs this rank starts.
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return describe(fd);
}

std::optional<std::string> wait_until_listening(const std::string& host, int port,
                                                Clock::time_point deadline) {
  std::string last = "nothing was tried";
  do {
    AddrInfo addresses;
    try {
      addresses = resolve(host, port, AI_NUMERICSERV);
    } catch (const DistributedError& e) {
      return std::string(e.what());
    }
    for (addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) continue;
      int error = 0;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        error = errno;
        if (error == EINPROGRESS) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
          pollfd waiting{fd, POLLOUT, 0};
          const int ready = ::poll(&waiting, 1, static_cast<int>(std::max<int64_t>(1, left.count())));
          socklen_t length = sizeof(error);
          if (ready == 1) {
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
          } else {
            error = ETIMEDOUT;
          }
        }
      }
      ::close(fd);
      if (error == 0) return std::nullopt;
      last = std::strerror(error);
      if (error == ECONNREFUSED) last += ": nothing listens there yet";
    }
    // Rank 0 usually starts within a second of the others: poll often, without spinning.
    const auto pause = std::min<Clock::duration>(std::chrono::milliseconds(100), deadline - Clock::now());
    if (pause > Clock::duration::zero()) std::this_thread::sleep_for(pause);
  } while (Clock::now() < deadline);
  return last;
}

}  // namespace acc::detail
