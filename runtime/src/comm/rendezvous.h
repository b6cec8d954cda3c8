#pragma once
// Joining the job. Rank 0 serves a TCPStore on the socket the launcher reserved for it (or one it
// binds on MASTER_ADDR: loopback when the job stays on one machine); every rank connects, checks
// that the store belongs to its own job (the job id), and waits until every rank has arrived.
// One deadline covers all of it, and each failure names what is missing: rank 0's store, or the
// ranks that did not arrive.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

#include <acc/launch.h>

namespace acc::detail {

/// The store of this job's current attempt (keys of earlier attempts under torchrun's agent store
/// are out of sight). Throws DistributedError when the deadline passes or the job ids differ.
c10::intrusive_ptr<c10d::Store> rendezvous(const LaunchInfo& launch, std::chrono::milliseconds timeout);

}  // namespace acc::detail
