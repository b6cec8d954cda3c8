#pragma once
// Joining the job. Rank 0 serves a TCPStore on the socket the launcher reserved for it (or one it
// binds on MASTER_ADDR: loopback when the job stays on one machine); every rank connects, checks
// that the store belongs to its own job (the job id), and waits until every rank has arrived. With
// a secret (ACC_STORE_SECRET, which acc-launch sets for every one-machine job), the store listens on
// loopback on a port of its own and MASTER_PORT reaches it only through an authenticating gate
// (comm/store_gate.h). That inner port is still open to local users who look it up in /proc/net/tcp:
// c10d's TCPStore cannot check who connects to it.
// One deadline covers all of it, and each failure names what is missing: rank 0's store, or the
// ranks that did not arrive.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include <acc/launch.h>

namespace acc::detail {

struct JoinedStore {
  /// The store of this job's current attempt (keys of earlier attempts under torchrun's agent
  /// store are out of sight).
  c10::intrusive_ptr<c10d::Store> store;
  /// With ACC_STORE_SECRET: rank 0's gate, or this rank's relay to it. It must outlive `store` and
  /// every store made from it.
  std::shared_ptr<void> access;
};

/// Throws DistributedError when the deadline passes, the job ids differ or the secret is refused;
/// ConfigError for a secret that is too short.
JoinedStore rendezvous(const LaunchInfo& launch, std::chrono::milliseconds timeout);

}  // namespace acc::detail
