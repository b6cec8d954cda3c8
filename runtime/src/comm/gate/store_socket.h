#pragma once
// The sockets around the rendezvous store, before c10d sees them: the listening socket rank 0
// serves on (bound to MASTER_ADDR's address, never to every interface when the job stays on one
// machine), and a connection probe with a real deadline (c10d's own connect retries restart
// their timeout, which made a 5 s rendezvous give up after 10 s). Torch-free.
#include <chrono>
#include <optional>
#include <string>

namespace acc::detail {

struct ListeningSocket {
  int fd = -1;
  int port = 0;
  /// Where this machine's own clients connect: the bound address, or 127.0.0.1 when bound to every
  /// interface.
  std::string connect_host;
  /// Set when MASTER_ADDR is not an address of this machine (a NAT or service address) and the
  /// socket had to be bound to every interface instead: the reason, for a warning.
  std::string fallback_reason;
};

/// Binds and listens on the first address of `host` that takes `port` (0: a free one), as
/// acc-launch binds it (acc_common/port_binding.h). Returns the descriptor, or -1 with `error` set
/// to the errno of the last attempt (EADDRINUSE: the port is taken; EADDRNOTAVAIL: `host` is not
/// this machine's). Throws DistributedError when `host` does not resolve.
int bind_listening(const std::string& host, int port, int& error);

/// Binds and listens on `host`:`port` (0: a free port). `host` is resolved; loopback names bind
/// loopback only. Throws DistributedError naming the address when the port is taken or the name
/// does not resolve.
ListeningSocket listen_for_store(const std::string& host, int port);

/// Checks that `fd` is a listening TCP socket (an inherited ACC_STORE_LISTEN_FD) and returns its
/// port and connect host; throws ConfigError naming the variable otherwise.
ListeningSocket adopt_listening_socket(int fd);

/// Connects to `host`:`port` again and again until one connection succeeds or `deadline` passes.
/// Returns nullopt once something accepts; otherwise why the last attempt failed.
std::optional<std::string> wait_until_listening(const std::string& host, int port,
                                                std::chrono::steady_clock::time_point deadline);

/// True for "localhost", 127.0.0.0/8 and ::1.
bool is_loopback_host(const std::string& host);

}  // namespace acc::detail
