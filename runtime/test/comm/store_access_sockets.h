#pragma once
// What a local user sees of a job's store (issue 35, item 3), read from /proc as any process of the
// same uid can: the TCP sockets a process listens on (its socket inodes in /proc/<pid>/fd matched
// in /proc/<pid>/net/tcp{,6}), the processes started under another, and raw requests to a port with
// a hard deadline. Used by rendezvous_test.cpp (torch-free) and by the intruders of
// rendezvous_worker.cpp (store_access_intruder.h).
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace acc::testing::store_access {

struct Listener {
  int port = 0;
  std::string address;  // as /proc writes it: "0100007F" (127.0.0.1), 32 hex digits for IPv6
  unsigned long inode = 0;
  bool v6 = false;
};

inline std::string describe(const std::vector<Listener>& listeners) {
  std::string text;
  for (const auto& l : listeners) {
    text += (text.empty() ? "" : ", ") + std::to_string(l.port) + (l.v6 ? " (IPv6 " : " (") + l.address + ")";
  }
  return text.empty() ? "none" : text;
}

/// The inodes of the sockets `pid` holds open (empty when it has exited).
inline std::set<unsigned long> socket_inodes(pid_t pid) {
  std::set<unsigned long> inodes;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return inodes;
  while (dirent* entry = readdir(d)) {
    char target[128];
    const std::string link = dir + "/" + entry->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    unsigned long inode = 0;
    if (std::sscanf(target, "socket:[%lu]", &inode) == 1) inodes.insert(inode);
  }
  closedir(d);
  return inodes;
}

/// The sockets in LISTEN state (0A) of a /proc/<pid>/net/tcp{,6} table whose inodes are in `owned`.
inline void listeners_in(const std::string& table, bool v6, const std::set<unsigned long>& owned,
                         std::vector<Listener>& found) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    unsigned long inode = 0;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    if (state != "0A" || owned.count(inode) == 0) continue;
    const auto colon = local.find(':');
    found.push_back({static_cast<int>(std::strtol(local.c_str() + colon + 1, nullptr, 16)), local.substr(0, colon),
                     inode, v6});
  }
}

/// The TCP sockets `pid` listens on, IPv4 and IPv6, by port.
inline std::vector<Listener> listening_sockets(pid_t pid) {
  const auto owned = socket_inodes(pid);
  std::vector<Listener> found;
  if (owned.empty()) return found;
  const std::string net = "/proc/" + std::to_string(pid) + "/net/";
  listeners_in(net + "tcp", false, owned, found);
  listeners_in(net + "tcp6", true, owned, found);
  std::sort(found.begin(), found.end(), [](const Listener& a, const Listener& b) { return a.port < b.port; });
  return found;
}

/// Every process started under `root`, at any depth (its children, theirs, ...), not `root` itself.
inline std::vector<pid_t> descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  DIR* d = opendir("/proc");
  if (d == nullptr) return {};
  while (dirent* entry = readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close_paren = text.rfind(')');  // the command name may hold spaces and parentheses
    if (close_paren == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(text.c_str() + close_paren + 1, " %c %d", &state, &ppid) == 2) children.emplace(ppid, pid);
  }
  closedir(d);
  std::vector<pid_t> found;
  std::vector<pid_t> frontier{root};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    for (auto [it, end] = children.equal_range(parent); it != end; ++it) {
      found.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return found;
}

/// Connects to 127.0.0.1:port, sends `request`, and returns whatever comes back until the peer
/// closes or `limit` passes (a silent peer cannot hold the caller longer). Empty when nothing
/// listens.
inline std::string raw_exchange(int port, const std::string& request, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return {};
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  std::string received;
  auto left_ms = [&] {
    return static_cast<int>(std::max<long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count()));
  };
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0 && errno != EINPROGRESS) {
    close(fd);
    return {};
  }
  std::size_t sent = 0;
  for (;;) {
    const int left = left_ms();
    if (left == 0) break;
    pollfd p{fd, static_cast<short>(POLLIN | (sent < request.size() ? POLLOUT : 0)), 0};
    if (poll(&p, 1, left) <= 0) continue;
    if (p.revents & POLLOUT) {
      const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<std::size_t>(n);
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      char buffer[4096];
      const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
      if (n > 0) {
        received.append(buffer, static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        break;  // closed or reset
      }
    }
  }
  close(fd);
  return received;
}

template <typename T>
void append_le(std::string& bytes, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) bytes.push_back(static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xFF));
}

/// What c10d's TCPStore client sends to read a key: VALIDATE with its magic number, then GET with
/// the key as u64 size + bytes, under the client's "/" prefix (TCPStoreBackend.hpp: QueryType,
/// validationMagicNumber; TCPStore.hpp: keyPrefix_).
inline std::string c10d_get_request(const std::string& key) {
  std::string bytes;
  bytes.push_back(0);  // QueryType::VALIDATE
  append_le<uint32_t>(bytes, 0x3C85F7CE);
  bytes.push_back(3);  // QueryType::GET
  append_le<uint64_t>(bytes, key.size() + 1);
  return bytes + "/" + key;
}

/// An acc store GET frame (comm/gate/store_protocol.h: u32 length | u32 id | u8 op | i64 number | strs keys
/// | strs values), sent without the gate's handshake.
inline std::string acc_get_request(const std::string& key) {
  std::string body;
  append_le<uint32_t>(body, 1);     // request id
  body.push_back(3);                // Op::kGet
  append_le<int64_t>(body, 1000);   // timeout ms
  append_le<uint32_t>(body, 1);     // one key
  append_le<uint32_t>(body, static_cast<uint32_t>(key.size()));
  body += key;
  append_le<uint32_t>(body, 0);     // no values
  std::string frame;
  append_le<uint32_t>(frame, static_cast<uint32_t>(body.size()));
  return frame + body;
}

}  // namespace acc::testing::store_access
