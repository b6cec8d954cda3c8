#pragma once
// Binding the rendezvous port. acc-launch and acc::launch reserve it before any rank starts and hand
// the socket to rank 0; the runtime's rank 0 binds it itself when no launcher did. All three bind the
// same way, here.
#include <stdexcept>
#include <string>

namespace acc::common {

// `host` does not resolve; what() is getaddrinfo's reason. Each wing names its own option in the message.
class UnresolvedHost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A close-on-exec TCP socket bound to the first address of `host` that takes `port` (0: a free one), and
// listening when `listen`. SO_REUSEADDR, so that connections of an earlier job in TIME_WAIT do not make
// the port look taken (a live listener still does). Returns the descriptor, or -1 with `error` set to the
// errno of the last attempt: EADDRINUSE (the port is taken: no other address is tried) or EADDRNOTAVAIL
// (`host` is not this machine's). Throws UnresolvedHost.
int bind_host(const std::string& host, int port, bool listen, int& error);

// The same on every IPv4 interface, for a rendezvous address that forwards here (NAT) but is not this
// machine's own.
int bind_every_interface(int port, bool listen, int& error);

// The port a bound socket has (0 if it cannot be told).
int bound_port(int fd);

}  // namespace acc::common
