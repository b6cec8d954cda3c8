#include "ports.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <acc_common/job_id.h>
#include <acc_common/port_binding.h>

#include "errors.h"

namespace acc::launcher {
namespace {

// Binds host:port; -1 with errno (EADDRNOTAVAIL when the host is not this machine's).
int bind_host(const std::string& host, int port, bool listen) {
  int error = 0;
  int fd = -1;
  try {
    fd = common::bind_host(host, port, listen, error);
  } catch (const common::UnresolvedHost& e) {
    throw UsageError("the main process address '" + host + "' (--main_process_ip) does not resolve: " + e.what());
  }
  if (fd < 0) errno = error;
  return fd;
}

int bind_any(int port, bool listen) {
  int error = 0;
  const int fd = common::bind_every_interface(port, listen, error);
  if (fd < 0) errno = error;
  return fd;
}

// The address itself, or every interface when it is not this machine's.
int bind_rendezvous(LaunchPlan& plan, int port, bool listen) {
  const int fd = bind_host(plan.master_addr, port, listen);
  if (fd >= 0 || errno != EADDRNOTAVAIL) return fd;
  const int any = bind_any(port, listen);
  if (any >= 0)
    plan.notes.push_back("the main process address " + plan.master_addr +
                         " is not an address of this machine (NAT?); the rendezvous listens on every interface");
  return any;
}

}  // namespace

StoreSocket& StoreSocket::operator=(StoreSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

StoreSocket::~StoreSocket() {
  if (fd_ >= 0) ::close(fd_);
}

int StoreSocket::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

StoreSocket reserve_store_socket(LaunchPlan& plan, bool listen) {
  if (plan.machine_rank != 0) return {};
  if (plan.world_size == 1 && !plan.port_given) return {};  // nothing rendezvouses
  int fd = bind_rendezvous(plan, plan.master_port, listen);
  if (fd < 0 && errno == EADDRINUSE && plan.master_port != 0) {
    if (plan.port_given || plan.num_machines > 1)
      throw UsageError("port " + std::to_string(plan.master_port) +
                       " (--main_process_port) is already in use on this machine; choose another with "
                       "--main_process_port N, or --main_process_port 0 for a free one");
    const int taken = plan.master_port;
    fd = bind_rendezvous(plan, 0, listen);
    if (fd >= 0)
      plan.notes.push_back("the default port " + std::to_string(taken) + " is in use; using free port " +
                           std::to_string(common::bound_port(fd)) + " (choose one with --main_process_port)");
  }
  if (fd < 0)
    throw UsageError("cannot reserve the rendezvous port " + plan.master_addr + ":" +
                     std::to_string(plan.master_port) + " (" + std::strerror(errno) +
                     "); give another with --main_process_ip / --main_process_port");
  plan.master_port = common::bound_port(fd);
  return StoreSocket(fd);
}

std::string new_job_id() {
  try {
    return common::new_job_id();
  } catch (const std::system_error& e) {
    throw UsageError(std::string("cannot make a job id: ") + e.what());
  }
}

}  // namespace acc::launcher
