#pragma once
// Whether a loopback TCP connection comes from this very process: the store relay
// (comm/store_gate.h) listens on 127.0.0.1, where any local user can connect, and must carry only
// this process's own store connections. Linux-only (reads /proc). Torch-free.
//
// How: the peer's socket is the one whose /proc/self/net/tcp{,6} entry has local address = our
// peer and remote address = our local address; its inode names it; this process holds it when one
// of /proc/self/fd/* links to "socket:[inode]".
#include <optional>
#include <string>

namespace acc::detail {

/// nullopt when the other end of `fd` (an accepted TCP connection on a loopback address) is a
/// socket that this process holds; else why it is refused (whose it is, as far as /proc says, or
/// that /proc could not tell). Never throws.
std::optional<std::string> refuse_unless_own_process(int fd);

}  // namespace acc::detail
