#include "ports.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <acc/environment.h>

#include "errors.h"

namespace acc::launcher {
namespace {

// Binds like the runtime's TCPStore server will (any address, SO_REUSEADDR so that connections of a
// previous run in TIME_WAIT do not count as "in use"). Returns the bound port, or -1 with errno set.
int try_bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  int bound = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    socklen_t length = sizeof(address);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) bound = ntohs(address.sin_port);
  }
  const int saved = errno;
  ::close(fd);
  errno = saved;
  return bound;
}

}  // namespace

int pick_free_port() {
  const int port = try_bind(0);
  if (port <= 0)
    throw UsageError(std::string("could not find a free port (") + std::strerror(errno) +
                     "); give one with --main_process_port N");
  return port;
}

bool port_in_use(int port) { return try_bind(port) < 0 && errno == EADDRINUSE; }

void assign_port(LaunchPlan& plan) {
  if (plan.machine_rank != 0) return;
  if (plan.master_port == 0) {
    plan.master_port = pick_free_port();
    return;
  }
  if (plan.world_size == 1 && !plan.port_given) return;  // nothing rendezvouses: no reason to complain
  if (!port_in_use(plan.master_port)) return;
  if (plan.port_given || plan.num_machines > 1)
    throw UsageError("port " + std::to_string(plan.master_port) + " (--main_process_port) is already in use on this "
                     "machine; choose another with --main_process_port N, or --main_process_port 0 for a free one");
  const int moved = pick_free_port();
  plan.notes.push_back("the default port " + std::to_string(env::kDefaultMainProcessPort) + " is in use; using free port " + std::to_string(moved) +
                       " (choose one with --main_process_port)");
  plan.master_port = moved;
}

}  // namespace acc::launcher
