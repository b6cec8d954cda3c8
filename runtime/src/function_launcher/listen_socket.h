#pragma once
// The rendezvous socket acc::launch reserves before forking: bound to master_addr and listening, so
// that rank 0 serves the store on it and no other program takes the port in between. Torch-free.
#include <string>

namespace acc::detail {

struct ReservedPort {
  int fd = -1;
  int port = 0;
};

/// Binds `host`:`port` (0: a free port) and listens. Throws ConfigError naming the address and
/// the option that fixes it when the name does not resolve or the port is taken.
ReservedPort reserve_port(const std::string& host, int port);

}  // namespace acc::detail
