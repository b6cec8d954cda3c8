#pragma once
// Joining the job. Rank 0 serves the job's store on the socket the launcher reserved for it (or one
// it binds on MASTER_ADDR: loopback when the job stays on one machine); every rank connects, checks
// that the store belongs to its own job (the job id), and waits until every rank has arrived.
// Without a secret the store is c10d's TCPStore, open to whoever reaches the port. With one
// (ACC_STORE_SECRET, which acc-launch sets for every one-machine job) it is rank 0's authenticating
// gate, which serves the keys itself (comm/gate/store_gate.h), and every rank's store an AccStore
// (comm/acc_store.h): no port of the job's store answers without the secret.
// One deadline covers all of it, and each failure names what is missing: rank 0's store, or the
// ranks that did not arrive.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include <acc/launch_info.h>

namespace acc::detail {

struct JoinedStore {
  /// The store of this job's current attempt (keys of earlier attempts under torchrun's agent
  /// store are out of sight).
  c10::intrusive_ptr<c10d::Store> store;
  /// With ACC_STORE_SECRET, on rank 0: the gate that serves the store. Keep it as long as `store`
  /// and the stores made from it are used (they fail with DistNetworkError once it is gone).
  std::shared_ptr<void> access;
};

/// Throws DistributedError when the deadline passes, the job ids differ or the secret is refused;
/// ConfigError for a secret that is too short.
JoinedStore rendezvous(const LaunchInfo& launch, std::chrono::milliseconds timeout);

}  // namespace acc::detail
