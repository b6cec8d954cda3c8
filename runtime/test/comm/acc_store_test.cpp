// AccStore (runtime/src/comm/acc_store.h), the c10d::Store of a job with a store secret, against
// c10d's own semantics: one typed suite runs on c10d::HashStore (the oracle), on rank 0's AccStore
// (a socketpair the gate adopts) and on another rank's (TCP and the handshake), so wherever
// HashStore applies, AccStore must do what it does. Then what only a served store has: add waking
// a waiter, a lost connection as c10::DistNetworkError, and the threads Gloo and NCCL call from.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <acc/errors.h>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "comm/acc_store.h"
#include "comm/gate/socket_util.h"
#include "comm/gate/store_client.h"
#include "comm/gate/store_gate.h"
#include "gate/loopback_peers.h"

namespace acc::detail {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using StorePtr = c10::intrusive_ptr<c10d::Store>;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }

// The oracle: one in-process table. Every handle is the same object (HashStore::clone shares it).
struct HashKind {
  static constexpr bool kServed = false;
  c10::intrusive_ptr<c10d::HashStore> table = c10::make_intrusive<c10d::HashStore>();
  StorePtr open(milliseconds timeout) {
    table->setTimeout(timeout);
    return table;
  }
};

// Rank 0's store: the gate serves it; rank 0 itself reaches it over a socketpair.
struct LocalKind {
  static constexpr bool kServed = true;
  std::string secret = new_store_secret();
  std::unique_ptr<StoreGate> gate = std::make_unique<StoreGate>(acc::testing::listen_on().release(), secret);
  std::shared_ptr<const AccStore::Opener> opener = std::make_shared<const AccStore::Opener>(
      [gate = gate.get()] { return StoreConnection(Fd(gate->adopt_local())); });
  StorePtr open(milliseconds timeout) { return c10::make_intrusive<AccStore>(opener, timeout); }
};

// Another rank's: TCP to the gate, and the handshake.
struct RemoteKind {
  static constexpr bool kServed = true;
  std::string secret = new_store_secret();
  std::unique_ptr<StoreGate> gate = std::make_unique<StoreGate>(acc::testing::listen_on().release(), secret);
  std::shared_ptr<const AccStore::Opener> opener = std::make_shared<const AccStore::Opener>(
      [port = gate->port(), secret = secret] { return StoreConnection::connect("127.0.0.1", port, secret, {}); });
  StorePtr open(milliseconds timeout) { return c10::make_intrusive<AccStore>(opener, timeout); }
};

constexpr milliseconds kTimeout{10000};  // long enough never to pass unless a test waits for it

template <typename Kind>
class AccStoreConformance : public ::testing::Test {
 protected:
  Kind kind;  // first: destroyed last (rank 0's gate outlives every store)
  StorePtr store = kind.open(kTimeout);
  StorePtr other = kind.open(kTimeout);  // another rank's handle on the same keys
};

struct KindNames {
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, HashKind>) return "HashStore";
    if (std::is_same_v<T, LocalKind>) return "RankZeroSocketpair";
    return "OtherRankTcp";
  }
};

using AllKinds = ::testing::Types<HashKind, LocalKind, RemoteKind>;
TYPED_TEST_SUITE(AccStoreConformance, AllKinds, KindNames);

// Runs `fn` on a thread after `delay`; joined when destroyed.
class Later {
 public:
  Later(milliseconds delay, std::function<void()> fn)
      : thread_([delay, fn = std::move(fn)] {
          std::this_thread::sleep_for(delay);
          fn();
        }) {}
  ~Later() { thread_.join(); }

 private:
  std::thread thread_;
};

TYPED_TEST(AccStoreConformance, SetThenGet) {
  this->store->set("a", "alpha");
  EXPECT_EQ(this->store->get_to_str("a"), "alpha");
  EXPECT_EQ(this->other->get_to_str("a"), "alpha");
  this->other->set("a", std::string("\0b\xff", 3));
  EXPECT_EQ(this->store->get("a"), bytes(std::string("\0b\xff", 3)));
  this->store->set("empty", "");
  EXPECT_EQ(this->store->get_to_str("empty"), "");
  EXPECT_TRUE(this->store->hasExtendedApi());
}

TYPED_TEST(AccStoreConformance, GetWaitsForAnotherRanksSet) {
  const auto start = Clock::now();
  Later later(300ms, [&] { this->other->set("late", "here"); });
  EXPECT_EQ(this->store->get_to_str("late"), "here");
  EXPECT_GE(ms_since(start), 250);
}

TYPED_TEST(AccStoreConformance, GetTimesOutWithDistStoreErrorAtTheTimeout) {
  this->store->setTimeout(1000ms);  // long enough that 10 % is more than a loaded machine's scheduling delay
  const auto start = Clock::now();
  try {
    this->store->get("never");
    FAIL() << "get returned a key nobody set";
  } catch (const c10::DistStoreError& e) {
    if (TypeParam::kServed) {
      EXPECT_TRUE(contains(e.what(), "GET of the store's key \"never\" found it missing after 1 s")) << e.what();
    }
  }
  const double took = ms_since(start);
  EXPECT_GE(took, 1000);
  EXPECT_LE(took, 1100) << "the store's timeout must hold within 10 %";
}

TYPED_TEST(AccStoreConformance, GetWithoutATimeoutWaitsForTheKey) {
  this->store->setTimeout(c10d::Store::kNoTimeout);
  const auto start = Clock::now();
  Later later(300ms, [&] { this->other->set("late", "here"); });
  EXPECT_EQ(this->store->get_to_str("late"), "here");
  EXPECT_GE(ms_since(start), 250);
}

TYPED_TEST(AccStoreConformance, WaitReturnsOnceEveryKeyExists) {
  const auto start = Clock::now();
  Later first(100ms, [&] { this->other->set("w1", "1"); });
  Later second(400ms, [&] { this->other->set("w2", "2"); });
  this->store->wait({"w1", "w2"});
  EXPECT_GE(ms_since(start), 350);
  this->store->wait({"w1", "w2"}, 100ms);  // present: at once
}

TYPED_TEST(AccStoreConformance, WaitTimesOutWithDistStoreError) {
  this->store->set("here", "1");
  const auto start = Clock::now();
  EXPECT_THROW(this->store->wait({"here", "missing"}, 1000ms), c10::DistStoreError);
  const double took = ms_since(start);
  EXPECT_GE(took, 1000);
  EXPECT_LE(took, 1100);
  this->store->setTimeout(1000ms);  // wait(keys) uses the store's timeout
  const auto again = Clock::now();
  EXPECT_THROW(this->store->wait({"missing"}), c10::DistStoreError);
  EXPECT_GE(ms_since(again), 1000);
  EXPECT_LE(ms_since(again), 1100);
}

TYPED_TEST(AccStoreConformance, AddKeepsDecimalText) {
  EXPECT_EQ(this->store->add("n", 5), 5) << "a missing key counts as 0";
  EXPECT_EQ(this->other->add("n", -7), -2);
  EXPECT_EQ(this->store->add("n", 0), -2);
  EXPECT_EQ(this->store->get_to_str("n"), "-2");
  this->store->set("m", "40");
  EXPECT_EQ(this->store->add("m", 2), 42);
  EXPECT_EQ(this->other->get_to_str("m"), "42");
}

TYPED_TEST(AccStoreConformance, CompareSetFollowsC10dsFourCases) {
  // Missing, expecting nothing: set.
  EXPECT_EQ(this->store->compareSet("c", "", "first"), "first");
  EXPECT_EQ(this->other->get_to_str("c"), "first");
  // Missing, expecting something: the expectation comes back, nothing is set.
  EXPECT_EQ(this->store->compareSet("absent", "x", "y"), "x");
  EXPECT_FALSE(this->store->check({"absent"}));
  // Present and as expected: replaced.
  EXPECT_EQ(this->store->compareSet("c", "first", "second"), "second");
  EXPECT_EQ(this->other->get_to_str("c"), "second");
  // Present and not as expected: the current value comes back, unchanged.
  EXPECT_EQ(this->store->compareSet("c", "first", "third"), "second");
  EXPECT_EQ(this->other->get_to_str("c"), "second");
}

TYPED_TEST(AccStoreConformance, DeleteKeySaysWhetherItExisted) {
  this->store->set("d", "1");
  EXPECT_TRUE(this->other->deleteKey("d"));
  EXPECT_FALSE(this->store->check({"d"}));
  EXPECT_FALSE(this->store->deleteKey("d"));
}

TYPED_TEST(AccStoreConformance, CheckNeedsEveryKey) {
  EXPECT_FALSE(this->store->check({"x"}));
  this->other->set("x", "1");
  EXPECT_TRUE(this->store->check({"x"}));
  EXPECT_FALSE(this->store->check({"x", "y"}));
  this->other->set("y", "1");
  EXPECT_TRUE(this->store->check({"x", "y"}));
}

TYPED_TEST(AccStoreConformance, GetNumKeysCountsTheKeys) {
  EXPECT_EQ(this->store->getNumKeys(), 0);
  this->store->set("a", "1");
  this->other->set("b", "2");
  this->other->set("b", "3");
  this->store->add("c", 1);
  EXPECT_EQ(this->store->getNumKeys(), 3);
  this->store->deleteKey("a");
  EXPECT_EQ(this->other->getNumKeys(), 2);
}

TYPED_TEST(AccStoreConformance, AppendCreatesAndExtends) {
  this->store->append("log", bytes("ab"));
  EXPECT_EQ(this->other->get_to_str("log"), "ab");
  this->other->append("log", bytes("cd"));
  EXPECT_EQ(this->store->get_to_str("log"), "abcd");
}

TYPED_TEST(AccStoreConformance, MultiGetWaitsForEveryKey) {
  this->store->set("m1", "one");
  const auto start = Clock::now();
  Later later(300ms, [&] { this->other->set("m2", "two"); });
  const auto values = this->store->multiGet({"m2", "m1"});
  EXPECT_GE(ms_since(start), 250);
  EXPECT_EQ(values, (std::vector<std::vector<uint8_t>>{bytes("two"), bytes("one")}));
}

TYPED_TEST(AccStoreConformance, MultiGetTimesOutWithDistStoreError) {
  this->store->set("m1", "one");
  this->store->setTimeout(1000ms);
  const auto start = Clock::now();
  EXPECT_THROW(this->store->multiGet({"m1", "missing"}), c10::DistStoreError);
  EXPECT_GE(ms_since(start), 1000);
  EXPECT_LE(ms_since(start), 1100);
}

TYPED_TEST(AccStoreConformance, MultiSetSetsEveryKey) {
  this->store->multiSet({"s1", "s2"}, {bytes("1"), bytes(std::string("\0", 1))});
  EXPECT_EQ(this->other->multiGet({"s1", "s2"}),
            (std::vector<std::vector<uint8_t>>{bytes("1"), bytes(std::string("\0", 1))}));
}

TYPED_TEST(AccStoreConformance, SetTimeoutChangesHowLongGetWaits) {
  for (const milliseconds timeout : {1000ms, 2000ms}) {
    this->store->setTimeout(timeout);
    EXPECT_EQ(this->store->getTimeout(), timeout);
    const auto start = Clock::now();
    EXPECT_THROW(this->store->get("never"), c10::DistStoreError);
    EXPECT_GE(ms_since(start), timeout.count());
    EXPECT_LE(ms_since(start), timeout.count() * 1.1);
  }
}

TYPED_TEST(AccStoreConformance, ACloneSharesTheKeysAndDoesNotWaitForTheOriginal) {
  StorePtr clone = this->store->clone();
  clone->set("from-clone", "1");
  EXPECT_EQ(this->store->get_to_str("from-clone"), "1");
  // A get blocked on the original does not hold up its clone (TCPStore's clones are
  // independent connections too): the clone's set is what ends the wait.
  const auto start = Clock::now();
  std::string got;
  std::thread waiter([&] { got = this->store->get_to_str("later"); });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(clone->check({"later"}));
  clone->set("later", "done");
  waiter.join();
  EXPECT_EQ(got, "done");
  EXPECT_LT(ms_since(start), 3000) << "the clone waited for the original's get";
}

TYPED_TEST(AccStoreConformance, EmptyAndRepeatedKeys) {
  EXPECT_TRUE(this->store->check({})) << "no key is missing";
  this->store->wait({}, 100ms);
  EXPECT_TRUE(this->store->multiGet({}).empty());
  this->store->multiSet({}, {});
  this->other->set("r", "1");
  EXPECT_EQ(this->store->multiGet({"r", "r"}), (std::vector<std::vector<uint8_t>>{bytes("1"), bytes("1")}));
  this->store->multiSet({"d", "d"}, {bytes("first"), bytes("last")});
  EXPECT_EQ(this->other->get_to_str("d"), "last") << "in order, the last one stays";
  EXPECT_EQ(this->store->getNumKeys(), 2);
}

TYPED_TEST(AccStoreConformance, ADeletedKeyIsWaitedForAgain) {
  this->store->set("k", "old");
  this->store->deleteKey("k");
  const auto start = Clock::now();
  Later later(300ms, [&] { this->other->set("k", "new"); });
  EXPECT_EQ(this->store->get_to_str("k"), "new");
  EXPECT_GE(ms_since(start), 250);
}

TYPED_TEST(AccStoreConformance, ListKeysIsNotOffered) {
  this->store->set("secret-ish", "1");
  if (TypeParam::kServed) {
    EXPECT_THROW(this->store->listKeys(), c10::NotImplementedError) << "listing the keys helps only an intruder";
  }
}

// --- what only a served store has ------------------------------------------------------------------

template <typename Kind>
class AccStoreServed : public AccStoreConformance<Kind> {};
using ServedKinds = ::testing::Types<LocalKind, RemoteKind>;
TYPED_TEST_SUITE(AccStoreServed, ServedKinds, KindNames);

TYPED_TEST(AccStoreServed, AddWakesAWaiter) {
  // HashStore's add does not notify its waiters; rank 0's gate answers them at once.
  const auto start = Clock::now();
  Later later(200ms, [&] { this->other->add("counter", 1); });
  EXPECT_EQ(this->store->get_to_str("counter"), "1");
  EXPECT_LT(ms_since(start), 2000) << "the add did not wake the get";
}

TYPED_TEST(AccStoreServed, EveryWriteWakesItsWaiters) {
  // Every op that writes a key answers the requests parked on it, on every connection.
  const std::vector<std::pair<std::string, std::function<void(c10d::Store&)>>> writes = {
      {"set", [](c10d::Store& s) { s.set("w", "v"); }},
      {"add", [](c10d::Store& s) { s.add("w", 1); }},
      {"append", [](c10d::Store& s) { s.append("w", bytes("v")); }},
      {"compareSet", [](c10d::Store& s) { s.compareSet("w", "", "v"); }},
      {"multiSet",
       [](c10d::Store& s) {
         s.multiSet({"x", "w"}, {bytes("1"), bytes("v")});
       }},
  };
  for (const auto& [name, write] : writes) {
    this->store->deleteKey("w");
    StorePtr second = this->store->clone();
    std::atomic<int> woken{0};
    std::thread get([&] { woken += !this->store->get("w").empty(); });
    std::thread multi_get([&] { woken += second->multiGet({"w"}).size(); });
    std::thread wait([&] {
      StorePtr third = this->store->clone();
      third->wait({"w"});
      ++woken;
    });
    std::this_thread::sleep_for(200ms);  // all three parked
    const auto start = Clock::now();
    write(*this->other);
    get.join();
    multi_get.join();
    wait.join();
    EXPECT_EQ(woken.load(), 3) << name;
    EXPECT_LT(ms_since(start), 2000) << name << " did not wake the waiters";
  }
}

TYPED_TEST(AccStoreServed, AddOnANonNumberIsADistStoreError) {
  this->store->set("word", "abc");
  try {
    this->store->add("word", 1);
    FAIL() << "add on \"abc\" returned";
  } catch (const c10::DistStoreError& e) {
    EXPECT_TRUE(contains(e.what(), "refused a ADD request")) << e.what();
  }
  EXPECT_EQ(this->store->get_to_str("word"), "abc") << "the connection is still good";
}

TYPED_TEST(AccStoreServed, TheGateGoneIsADistNetworkErrorPromptly) {
  std::atomic<bool> network_error{false};
  std::string text;
  std::thread waiter([&] {
    try {
      this->store->get("never");
    } catch (const c10::DistNetworkError& e) {
      network_error = true;
      text = e.what();
    } catch (const std::exception& e) {
      text = e.what();
    }
  });
  std::this_thread::sleep_for(300ms);  // the get is parked on the gate
  const auto start = Clock::now();
  this->kind.gate.reset();
  waiter.join();
  EXPECT_LT(ms_since(start), 1000);
  EXPECT_TRUE(network_error) << text;
  EXPECT_TRUE(contains(text, "closed the connection before answering a GET request")) << text;
  // NCCL's heartbeat catches DistNetworkError around its check: every later call raises it.
  EXPECT_THROW(this->store->check({"exception_dump"}), c10::DistNetworkError);
  EXPECT_THROW(this->other->set("k", "v"), c10::DistNetworkError);
}

TYPED_TEST(AccStoreServed, SixteenThreadsOnOneStoreAndOnClones) {
  // 8 threads share one AccStore and each waits there for a key that one of 8 other threads sets
  // through its own clone; those also wait for each other's keys. Gloo's lazy init and NCCL's
  // threads call a store like this.
  constexpr int kPairs = 8;
  constexpr int kRounds = 20;
  std::vector<StorePtr> clones;
  for (int i = 0; i < kPairs; ++i) clones.push_back(this->store->clone());
  std::atomic<int> wrong{0};
  std::vector<std::string> errors(2 * kPairs);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int i = 0; i < kPairs; ++i) {
    threads.emplace_back([&, i] {  // on the shared store: blocking gets
      try {
        for (int r = 0; r < kRounds; ++r) {
          const std::string key = "g/" + std::to_string(r) + "/" + std::to_string(i);
          if (this->store->get_to_str(key) != key + "=v") ++wrong;
          this->store->add("got", 1);
        }
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
    threads.emplace_back([&, i] {  // on its own clone: sets, and gets of the other clones' keys
      try {
        auto& mine = clones[i];
        for (int r = 0; r < kRounds; ++r) {
          const std::string key = "g/" + std::to_string(r) + "/" + std::to_string(i);
          mine->set(key, key + "=v");
          const std::string next = "g/" + std::to_string(r) + "/" + std::to_string((i + 1) % kPairs);
          if (mine->get_to_str(next) != next + "=v") ++wrong;
        }
      } catch (const std::exception& e) {
        errors[kPairs + i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(this->other->add("got", 0), kPairs * kRounds);
  EXPECT_LT(ms_since(start), 8000);
}

TYPED_TEST(AccStoreServed, WatchdogChecksWhileAnotherThreadsGetBlocks) {
  // NCCL's watchdog polls check() on its own thread while the main thread's get waits. On the
  // same store the check waits its turn (as on a TCPStore, whose calls hold one lock); on a clone
  // it goes on meanwhile. Neither mixes up the answers.
  StorePtr watchdog_clone = this->store->clone();
  std::string got;
  std::thread main_thread([&] { got = this->store->get_to_str("ncclUniqueId"); });
  std::this_thread::sleep_for(100ms);

  std::atomic<int> clone_checks{0};
  std::thread on_clone([&] {
    for (int i = 0; i < 50; ++i) {
      if (!watchdog_clone->check({"exception_dump"})) ++clone_checks;
      std::this_thread::sleep_for(2ms);
    }
  });
  std::atomic<int> same_checks{0};
  std::thread on_same([&] {
    for (int i = 0; i < 10; ++i) {
      if (!this->store->check({"exception_dump"})) ++same_checks;
    }
  });
  on_clone.join();
  EXPECT_EQ(clone_checks.load(), 50) << "the clone's checks went on while the get waited";
  EXPECT_EQ(same_checks.load(), 0) << "the same store's checks wait for its get";
  this->other->set("ncclUniqueId", "id");
  main_thread.join();
  on_same.join();
  EXPECT_EQ(got, "id");
  EXPECT_EQ(same_checks.load(), 10);
}

TEST(AccStoreRemote, AWrongSecretIsNamedWhenTheStoreIsMade) {
  StoreGate gate(acc::testing::listen_on().release(), new_store_secret());
  auto opener = std::make_shared<const AccStore::Opener>(
      [port = gate.port()] { return StoreConnection::connect("127.0.0.1", port, new_store_secret(), {}); });
  const auto start = Clock::now();
  try {
    c10::make_intrusive<AccStore>(opener, kTimeout);
    FAIL() << "a wrong secret made a store";
  } catch (const DistributedError& e) {
    EXPECT_TRUE(contains(e.what(), "refused this rank's ACC_STORE_SECRET")) << e.what();
  }
  EXPECT_LT(ms_since(start), 1000);
}

}  // namespace
}  // namespace acc::detail
