#pragma once
// The job's store as every rank sees it in a job with a store secret: a c10d::Store over one
// authenticated connection to rank 0's gate (comm/gate/store_client.h), which serves the keys itself
// (comm/gate/store_protocol.h). Gloo, NCCL and acc's rendezvous use it as they would a TCPStore client:
// the same blocking (get, wait and multiGet wait for their keys up to the timeout) and the same
// errors (c10::DistStoreError for a timeout or a refused request, c10::DistNetworkError when the
// connection is lost: NCCL's heartbeat catches that one). The only torch file of the store.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/gate/store_client.h"

namespace acc::detail {

class AccStore final : public c10d::Store {
 public:
  /// Opens a new connection to the store: connect() to rank 0's gate on other ranks,
  /// StoreConnection(gate.adopt_local()) on rank 0. Shared by an AccStore and its clones.
  using Opener = std::function<StoreConnection()>;

  /// Calls `open` once for its own connection; throws what it throws (acc::DistributedError naming
  /// the gate when it cannot be reached or refuses the secret).
  AccStore(std::shared_ptr<const Opener> open, std::chrono::milliseconds timeout);

  /// A new AccStore on a new connection (like TCPStore::clone): independent of this one, so a
  /// thread blocked in one does not hold up the other. c10::DistNetworkError if it cannot connect.
  c10::intrusive_ptr<c10d::Store> clone() override;

  using c10d::Store::compareSet;  // the std::string overloads of the base
  using c10d::Store::set;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  /// Waits up to getTimeout() for the key (forever for kNoTimeout).
  std::vector<uint8_t> get(const std::string& key) override;
  /// The value is kept as decimal text (a missing key counts as 0); returns the new value.
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  void append(const std::string& key, const std::vector<uint8_t>& value) override;
  /// Waits up to getTimeout() for every key.
  std::vector<std::vector<uint8_t>> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<std::vector<uint8_t>>& values) override;
  bool hasExtendedApi() const override { return true; }
  // listKeys and queue*: the base's NotImplementedError (nothing acc runs uses them, and listing
  // the keys would only help whoever should not read them).

 private:
  store_protocol::Response call(store_protocol::Request request, std::chrono::milliseconds wait);

  std::shared_ptr<const Opener> open_;
  // One request at a time on the connection, as TCPStore's activeOpLock_: Gloo's lazy init and
  // NCCL's watchdog call from their own threads, and a blocking get holds it while it waits.
  std::mutex mutex_;
  StoreConnection connection_;
};

}  // namespace acc::detail
