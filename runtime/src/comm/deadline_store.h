#pragma once
// A store whose every call returns or throws within a deadline. c10d's TCPStore client reads its
// answers without one: a rank 0 that is stopped (SIGSTOP, a debugger) or whose machine dropped off
// the network keeps the connection open and never answers, and every other rank would block in
// get/check/add forever, in acc's own failure reports as anywhere else. Calls run on the store's own
// thread; a caller whose deadline passes gets StoreNotAnswering, and while that call is still stuck
// every later call fails at once with the same error instead of queueing behind it.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <acc/errors.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace acc::detail {

/// The store did not answer within the deadline (as opposed to closing the connection).
class StoreNotAnswering : public DistributedError {
 public:
  using DistributedError::DistributedError;
};

/// Within its scope, store calls made by this thread through any DeadlineStore wait at most
/// `deadline` (a failure report must not spend the job's whole timeout on an unresponsive store).
/// Nested guards take the shorter deadline.
class StoreDeadlineGuard {
 public:
  explicit StoreDeadlineGuard(std::chrono::milliseconds deadline);
  ~StoreDeadlineGuard();
  StoreDeadlineGuard(const StoreDeadlineGuard&) = delete;
  StoreDeadlineGuard& operator=(const StoreDeadlineGuard&) = delete;

 private:
  std::chrono::milliseconds previous_;
};

class DeadlineStore final : public c10d::Store {
 public:
  /// `deadline` bounds each call (a wait: its own timeout plus `deadline`); `whose` names the store
  /// in errors ("rank 0's store at 10.0.0.1:29500").
  DeadlineStore(c10::intrusive_ptr<c10d::Store> inner, std::chrono::milliseconds deadline, std::string whose);
  ~DeadlineStore() override;

  c10::intrusive_ptr<c10d::Store> clone() override;
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& current,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  void append(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<std::vector<uint8_t>> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys, const std::vector<std::vector<uint8_t>>& values) override;
  void setTimeout(const std::chrono::milliseconds& timeout) override;
  bool hasExtendedApi() const override;

  struct Worker;

 private:
  template <typename Result, typename Call>
  Result run(const char* what, std::chrono::milliseconds deadline, Call call);

  c10::intrusive_ptr<c10d::Store> inner_;
  std::chrono::milliseconds deadline_;
  std::string whose_;
  std::shared_ptr<Worker> worker_;
};

}  // namespace acc::detail
