#include "comm/peer_process.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "comm/socket_util.h"

namespace acc::detail {

namespace {

// An endpoint as /proc/net/tcp6 spells it: 16 address bytes (IPv4 as ::ffff:a.b.c.d) and a port.
struct Endpoint {
  std::array<uint8_t, 16> address{};
  unsigned port = 0;
  bool operator==(const Endpoint& other) const { return address == other.address && port == other.port; }
};

std::optional<Endpoint> endpoint_of(const sockaddr_storage& storage) {
  Endpoint endpoint;
  if (storage.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(storage);
    endpoint.address[10] = endpoint.address[11] = 0xff;
    std::memcpy(endpoint.address.data() + 12, &in.sin_addr, 4);
    endpoint.port = ntohs(in.sin_port);
    return endpoint;
  }
  if (storage.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(storage);
    std::memcpy(endpoint.address.data(), &in6.sin6_addr, 16);
    endpoint.port = ntohs(in6.sin6_port);
    return endpoint;
  }
  return std::nullopt;
}

// "0100007F:1F90" (tcp) or 32 hex digits ":1F90" (tcp6). The kernel prints each 32-bit word of
// the address as the host-order number its bytes make, so reading a word back as a host-order
// number and storing it gives the address bytes again.
bool parse_endpoint(const char* text, Endpoint& endpoint) {
  const char* colon = std::strchr(text, ':');
  if (colon == nullptr) return false;
  const std::size_t digits = static_cast<std::size_t>(colon - text);
  if (digits != 8 && digits != 32) return false;
  std::array<uint8_t, 16> bytes{};
  for (std::size_t word = 0; word < digits / 8; ++word) {
    char hex[9] = {};
    std::memcpy(hex, text + 8 * word, 8);
    const uint32_t value = static_cast<uint32_t>(std::strtoul(hex, nullptr, 16));
    std::memcpy(bytes.data() + 4 * word, &value, 4);
  }
  if (digits == 8) {
    endpoint.address = {};
    endpoint.address[10] = endpoint.address[11] = 0xff;
    std::memcpy(endpoint.address.data() + 12, bytes.data(), 4);
  } else {
    endpoint.address = bytes;
  }
  endpoint.port = static_cast<unsigned>(std::strtoul(colon + 1, nullptr, 16));
  return true;
}

struct Owner {
  unsigned long inode = 0;
  unsigned uid = 0;
};

// The inode and uid of the socket with this (local, remote) pair, from one /proc/net table.
std::optional<Owner> find_socket(const char* table, const Endpoint& local, const Endpoint& remote) {
  FILE* file = std::fopen(table, "re");
  if (file == nullptr) return std::nullopt;
  std::optional<Owner> found;
  char line[512];
  std::fgets(line, sizeof(line), file);  // the header
  while (!found && std::fgets(line, sizeof(line), file) != nullptr) {
    char local_text[64], remote_text[64];
    unsigned uid = 0;
    unsigned long inode = 0;
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
    if (std::sscanf(line, " %*s %63s %63s %*s %*s %*s %*s %u %*s %lu", local_text, remote_text, &uid, &inode) != 4) {
      continue;
    }
    Endpoint entry_local, entry_remote;
    if (parse_endpoint(local_text, entry_local) && parse_endpoint(remote_text, entry_remote) && entry_local == local &&
        entry_remote == remote) {
      found = Owner{inode, uid};
    }
  }
  std::fclose(file);
  return found;
}

bool this_process_holds(unsigned long inode) {
  DIR* fds = opendir("/proc/self/fd");
  if (fds == nullptr) return false;
  const std::string wanted = "socket:[" + std::to_string(inode) + "]";
  bool held = false;
  while (!held) {
    const dirent* entry = readdir(fds);
    if (entry == nullptr) break;
    char target[64];
    const ssize_t n = readlinkat(dirfd(fds), entry->d_name, target, sizeof(target));
    held = n == static_cast<ssize_t>(wanted.size()) && std::memcmp(target, wanted.data(), wanted.size()) == 0;
  }
  closedir(fds);
  return held;
}

}  // namespace

std::optional<std::string> refuse_unless_own_process(int fd) {
  sockaddr_storage ours{}, theirs{};
  socklen_t ours_length = sizeof(ours), theirs_length = sizeof(theirs);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ours), &ours_length) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &theirs_length) != 0) {
    return "its addresses are unknown (" + errno_text(errno) + ")";
  }
  const auto local = endpoint_of(ours);
  const auto remote = endpoint_of(theirs);
  if (!local || !remote) return std::string("it is not a TCP connection");
  // The peer's own entry: its local address is our remote one and the other way round.
  std::optional<Owner> owner = find_socket("/proc/self/net/tcp", *remote, *local);
  if (!owner) owner = find_socket("/proc/self/net/tcp6", *remote, *local);
  if (!owner) {
    return std::string(
        "its socket is not in /proc/self/net/tcp or tcp6 (is /proc mounted? the relay cannot tell "
        "whose connection it is)");
  }
  if (owner->inode == 0) return std::string("its socket was already closed by its owner");
  if (this_process_holds(owner->inode)) return std::nullopt;
  return "it comes from another process (uid " + std::to_string(owner->uid) + ", socket inode " +
         std::to_string(owner->inode) + ")";
}

}  // namespace acc::detail
