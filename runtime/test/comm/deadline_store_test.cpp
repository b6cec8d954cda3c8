// The store's deadline (runtime/src/comm/deadline_store.h), on an in-process store that answers when
// told to: a call that does not return in time raises StoreNotAnswering, later calls fail at once
// while it is stuck, work again once it returns, and a guard shortens the deadline. The multi-process
// form (a stopped rank 0) is Stall.AStoppedRankZeroIsNamedWithinTheDeadline.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <chrono>
#include <condition_variable>
#include <thread>
#include <mutex>

#include "comm/deadline_store.h"

namespace acc::detail {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A HashStore whose check() blocks until released: a server that has stopped answering.
class StoppedStore : public c10d::HashStore {
 public:
  bool check(const std::vector<std::string>& keys) override {
    std::unique_lock<std::mutex> lock(mutex_);
    answering_.wait(lock, [&] { return released_; });
    return c10d::HashStore::check(keys);
  }
  void release() {
    std::lock_guard<std::mutex> lock(mutex_);
    released_ = true;
    answering_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable answering_;
  bool released_ = false;
};

milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

TEST(DeadlineStore, ACallWithoutAnAnswerRaisesAtTheDeadlineAndLaterCallsFailAtOnce) {
  auto inner = c10::make_intrusive<StoppedStore>();
  DeadlineStore store(inner, milliseconds(300), "rank 0's store at 127.0.0.1:1");
  store.set("key", std::vector<uint8_t>{1});  // calls the server answers go through

  auto start = Clock::now();
  try {
    store.check({"key"});
    FAIL() << "check() returned from a store that does not answer";
  } catch (const StoreNotAnswering& e) {
    EXPECT_STREQ(e.what(),
                 "acc: rank 0's store at 127.0.0.1:1 did not answer this rank's check call within 300 ms: the rank that "
                 "serves it is stopped (SIGSTOP, a debugger), its machine is unreachable, or it is too busy to "
                 "answer");
  }
  EXPECT_GE(since(start), milliseconds(300));
  EXPECT_LT(since(start), milliseconds(1300));

  // The stuck call holds the connection: the next one does not queue behind it.
  start = Clock::now();
  EXPECT_THROW(store.get("key"), StoreNotAnswering);
  EXPECT_LT(since(start), milliseconds(100));

  inner->release();  // the server answers again
  for (auto until = Clock::now() + std::chrono::seconds(5); Clock::now() < until;) {
    try {
      EXPECT_EQ(store.get("key"), std::vector<uint8_t>{1});
      return;
    } catch (const StoreNotAnswering&) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  FAIL() << "the store did not work again after the stuck call returned";
}

TEST(DeadlineStore, AGuardShortensTheDeadlineOfThisThreadsCalls) {
  auto inner = c10::make_intrusive<StoppedStore>();
  DeadlineStore store(inner, milliseconds(60000), "rank 0's store");
  const auto start = Clock::now();
  {
    const StoreDeadlineGuard soon(milliseconds(200));
    EXPECT_THROW(store.check({"key"}), StoreNotAnswering);
  }
  EXPECT_LT(since(start), milliseconds(2000));
  inner->release();
}

TEST(DeadlineStore, DestroyingAStoreWithACallStuckInItDoesNotBlock) {
  auto inner = c10::make_intrusive<StoppedStore>();
  const auto start = Clock::now();
  {
    DeadlineStore store(inner, milliseconds(100), "rank 0's store");
    EXPECT_THROW(store.check({"key"}), StoreNotAnswering);
  }
  EXPECT_LT(since(start), milliseconds(2000));
  inner->release();  // the thread left behind returns and ends
}

TEST(DeadlineStore, ErrorsOfTheStoreItselfPassThrough) {
  DeadlineStore store(c10::make_intrusive<c10d::HashStore>(), milliseconds(5000), "rank 0's store");
  EXPECT_EQ(store.add("n", 2), 2);
  EXPECT_EQ(store.add("n", 3), 5);
  EXPECT_TRUE(store.check({"n"}));
  EXPECT_FALSE(store.check({"absent"}));
  // A wait for a key nobody sets ends at its own timeout with c10d's error, not the store's deadline.
  EXPECT_THROW(store.wait({"absent"}, milliseconds(50)), c10::Error);
}

}  // namespace
}  // namespace acc::detail
