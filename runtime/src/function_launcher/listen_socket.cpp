#include "function_launcher/listen_socket.h"

#include <acc/errors.h>
#include <acc_common/port_binding.h>

#include <cerrno>
#include <cstring>

#include "comm/gate/store_socket.h"

namespace acc::detail {

ReservedPort reserve_port(const std::string& host, int port) {
  const std::string service = std::to_string(port);
  int error = 0;
  int fd = -1;
  try {
    fd = bind_listening(host, port, error);
  } catch (const DistributedError&) {
    throw ConfigError("acc::launch: master_addr '" + host +
                      "' does not resolve; use 127.0.0.1 (the default) or an address of this machine");
  }
  if (fd >= 0) return {fd, common::bound_port(fd)};
  const std::string where = host + ":" + service;
  if (error == EADDRINUSE) {
    throw ConfigError("acc::launch: port " + service + " on " + host +
                      " is in use; choose another LaunchOptions::master_port, or 0 (the default) for a "
                      "free one");
  }
  if (error == EADDRNOTAVAIL) {
    throw ConfigError("acc::launch: master_addr '" + host +
                      "' is not an address of this machine (acc::launch runs every rank here); use "
                      "127.0.0.1 (the default) or an address of this machine");
  }
  throw ConfigError("acc::launch: cannot listen on " + where + ": " + std::strerror(error) +
                    "; choose another LaunchOptions::master_addr or master_port");
}

}  // namespace acc::detail
