#pragma once
// The rendezvous socket. On the main machine the launcher binds and listens on it before any rank starts
// and hands it to rank 0 (ACC_STORE_LISTEN_FD), which serves the store on it: the port is reserved for
// the whole job, restarts included, with no window in which another job can take it; and it listens
// only on the rendezvous address (loopback when the job stays on one machine), never on every interface.
#include <string>

#include "launch_plan.h"

namespace acc::launcher {

// Owns the listening descriptor; closing it releases the port.
class StoreSocket {
 public:
  StoreSocket() = default;
  explicit StoreSocket(int fd) : fd_(fd) {}
  StoreSocket(StoreSocket&& other) noexcept : fd_(other.release()) {}
  StoreSocket& operator=(StoreSocket&& other) noexcept;
  StoreSocket(const StoreSocket&) = delete;
  StoreSocket& operator=(const StoreSocket&) = delete;
  ~StoreSocket();

  int fd() const { return fd_; }  // -1 when nothing is reserved
  int release();

 private:
  int fd_ = -1;
};

// On the machine that serves the rendezvous (machine rank 0) of a job with more than one rank, binds
// plan.master_addr:plan.master_port and settles plan.master_port: 0 becomes the port the kernel chose; a
// busy port chosen by the user is a UsageError naming the port and the flag; a busy default port on a
// single machine moves to a free one, with a note (as Accelerate does). An address that is not this
// machine's (NAT) is served on every interface, with a note. Other machines only connect: nothing is
// reserved there.
// `listen` false, for a program that binds the port itself: the socket is only bound, to settle the
// port. A listening socket about to be closed would accept other machines' ranks into its backlog
// and drop them with it, and their rank 0 would wait for them forever.
StoreSocket reserve_store_socket(LaunchPlan& plan, bool listen = true);

// A fresh random job id (16 hex digits): ranks check it at rendezvous, so that no rank joins another job.
std::string new_job_id();

}  // namespace acc::launcher
