#pragma once
// Which of this machine's interfaces reaches another machine. Gloo needs an address of this machine that
// the others can connect to; the host name often resolves to a loopback address (Debian's /etc/hosts maps
// it to 127.0.1.1), so acc asks the kernel's routing table instead, as `ip route get` does.
#include <string>

namespace acc::common {

struct Route {
  std::string source_address;  // this machine's address on the way to the host ("10.0.0.2")
  std::string interface;  // the interface that holds it ("eth0"); empty if no interface lists it
  bool loopback = false;  // the host is this machine, reached over loopback
};

// The route to `host` (a name or an IPv4/IPv6 address), from a UDP socket connected to it (nothing is
// sent) and the interface list. Returns false with `error` set ("cannot resolve 'x': ...", "no route to
// 10.1.2.3: Network is unreachable") when there is none.
bool route_to(const std::string& host, Route& route, std::string& error);

// Where Gloo listens for the other ranks, and why, in the words acc-env and the ranks print.
struct GlooNetwork {
  std::string interface;  // use this interface (a variable named it) ...
  std::string address;  // ... else bind this address; both empty: the host name's address (Gloo's default)
  std::string description;  // "eth0 (10.0.0.2), the route to MASTER_ADDR 10.0.0.1"
};

// GLOO_SOCKET_IFNAME wins, then NCCL_SOCKET_IFNAME when it names one interface ("eth0", not "^docker" or
// "eth0,eth1"), so that one variable serves both; else the route to `master_addr` (loopback only when
// MASTER_ADDR is this machine's loopback); else Gloo's default. Pass the variables' values ("" if unset).
GlooNetwork choose_gloo_network(const std::string& master_addr, const std::string& gloo_socket_ifname,
                                const std::string& nccl_socket_ifname);

}  // namespace acc::common
