#include <acc_common/network_route.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace acc::common {
namespace {

std::string numeric_host(const sockaddr* address, socklen_t length) {
  char text[NI_MAXHOST] = {};
  if (getnameinfo(address, length, text, sizeof text, nullptr, 0, NI_NUMERICHOST) != 0) return "";
  return text;
}

bool same_address(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  if (a->sa_family == AF_INET6)
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
  return false;
}

// The interface that holds `address`, and whether it is a loopback interface.
void find_interface(const sockaddr* address, Route& route) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || !same_address(entry->ifa_addr, address)) continue;
    route.interface = entry->ifa_name;
    route.loopback = route.loopback || (entry->ifa_flags & IFF_LOOPBACK) != 0;
    break;
  }
  freeifaddrs(list);
}

// The first IPv4 (else IPv6) address of the interface called `name`, or "" when it has none.
std::string interface_address(const std::string& name) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || name != entry->ifa_name) continue;
    const int family = entry->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    const socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (found.empty() || family == AF_INET) found = numeric_host(entry->ifa_addr, length);
    if (family == AF_INET) break;
  }
  freeifaddrs(list);
  return found;
}

// "eth0 (10.0.0.2, GLOO_SOCKET_IFNAME)", or without the address when the interface has none here.
std::string named_interface(const std::string& name, const char* variable) {
  const std::string address = interface_address(name);
  return name + " (" + (address.empty() ? std::string("no address here") : address) + ", " + variable + ")";
}

}  // namespace

bool route_to(const std::string& host, Route& route, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int status = getaddrinfo(host.c_str(), "9", &hints, &found); status != 0) {
    error = "cannot resolve '" + host + "': " + gai_strerror(status);
    return false;
  }
  error = "'" + host + "' has no address";
  bool ok = false;
  for (const addrinfo* candidate = found; candidate != nullptr && !ok; candidate = candidate->ai_next) {
    const int fd = socket(candidate->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // connect() on a datagram socket only asks the routing table; no packet leaves.
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (connect(fd, candidate->ai_addr, candidate->ai_addrlen) != 0) {
      error = "no route to " + numeric_host(candidate->ai_addr, candidate->ai_addrlen) + ": " + std::strerror(errno);
    } else if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      route = Route{};
      route.source_address = numeric_host(reinterpret_cast<sockaddr*>(&local), length);
      route.loopback = candidate->ai_family == AF_INET
                           ? (ntohl(reinterpret_cast<const sockaddr_in*>(candidate->ai_addr)->sin_addr.s_addr) >> 24) == 127
                           : IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(candidate->ai_addr)->sin6_addr);
      find_interface(reinterpret_cast<sockaddr*>(&local), route);
      ok = !route.source_address.empty();
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (ok) error.clear();
  return ok;
}

GlooNetwork choose_gloo_network(const std::string& master_addr, const std::string& gloo_socket_ifname,
                                const std::string& nccl_socket_ifname) {
  GlooNetwork chosen;
  if (!gloo_socket_ifname.empty()) {
    chosen.interface = gloo_socket_ifname;
    chosen.description = named_interface(gloo_socket_ifname, "GLOO_SOCKET_IFNAME");
    return chosen;
  }
  if (!nccl_socket_ifname.empty() && nccl_socket_ifname.find_first_of("^=,") == std::string::npos) {
    chosen.interface = nccl_socket_ifname;
    chosen.description = named_interface(nccl_socket_ifname, "NCCL_SOCKET_IFNAME");
    return chosen;
  }
  Route route;
  std::string error;
  if (route_to(master_addr, route, error)) {
    chosen.address = route.source_address;
    const std::string where = route.interface.empty() ? route.source_address
                                                      : route.interface + " (" + route.source_address + ")";
    chosen.description = route.loopback ? where + ": MASTER_ADDR " + master_addr + " is this machine's loopback"
                                        : where + ", the route to MASTER_ADDR " + master_addr;
    return chosen;
  }
  chosen.description = "the address of this machine's host name (" + error + ")";
  return chosen;
}

}  // namespace acc::common
