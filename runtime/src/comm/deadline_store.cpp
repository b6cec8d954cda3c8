#include "comm/deadline_store.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "comm/process_group.h"  // seconds_text

namespace acc::detail {

using Milliseconds = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

thread_local Milliseconds t_guard_deadline = Milliseconds::max();

// A wait's bound: its own timeout, then the deadline for the answer (0 or a huge timeout: none).
Milliseconds after(Milliseconds timeout, Milliseconds deadline) {
  if (timeout.count() <= 0 || timeout > Milliseconds::max() - deadline) return Milliseconds::max();
  return timeout + deadline;
}

struct SlotBase {
  bool done = false;       // the worker finished the call (under Worker::mutex)
  bool cancelled = false;  // its caller gave up before the worker started it
  std::exception_ptr error;
};

template <typename T>
struct Slot : SlotBase {
  std::optional<T> value;
};

struct Task {
  std::function<void()> body;
  std::shared_ptr<SlotBase> slot;
};

}  // namespace

StoreDeadlineGuard::StoreDeadlineGuard(Milliseconds deadline) : previous_(t_guard_deadline) {
  t_guard_deadline = std::min(previous_, std::max(deadline, Milliseconds(1)));
}

StoreDeadlineGuard::~StoreDeadlineGuard() { t_guard_deadline = previous_; }

// One thread per store runs the calls in order, as the TCPStore client (one connection, one lock)
// would anyway. The thread is left behind, holding its own reference to the store, when a call
// never returns.
struct DeadlineStore::Worker {
  std::mutex mutex;
  std::condition_variable wake;  // a task was queued, or the store is going away
  std::condition_variable done;  // a task finished
  std::deque<Task> tasks;
  bool stopping = false;
  bool running = false;    // the thread is inside a call
  bool abandoned = false;  // ...whose caller gave up on it
  std::string stuck_call;
  Clock::time_point stuck_since;
  std::thread thread;

  void loop() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stopping || !tasks.empty(); });
      if (tasks.empty()) return;  // stopping
      Task task = std::move(tasks.front());
      tasks.pop_front();
      if (task.slot->cancelled) continue;
      running = true;
      lock.unlock();
      task.body();
      lock.lock();
      running = false;
      abandoned = false;
      task.slot->done = true;
      done.notify_all();
    }
  }
};

DeadlineStore::DeadlineStore(c10::intrusive_ptr<c10d::Store> inner, Milliseconds deadline, std::string whose)
    : c10d::Store(inner->getTimeout()),
      inner_(std::move(inner)),
      deadline_(deadline),
      whose_(std::move(whose)),
      worker_(std::make_shared<Worker>()) {
  worker_->thread = std::thread([worker = worker_] { worker->loop(); });
}

DeadlineStore::~DeadlineStore() {
  std::unique_lock<std::mutex> lock(worker_->mutex);
  worker_->stopping = true;
  if (worker_->running && worker_->abandoned) {
    // Stuck in a call that will not return while the serving rank does not answer: leave the thread
    // (and the store it holds) to the end of the process rather than block this one.
    worker_->thread.detach();
    return;
  }
  worker_->wake.notify_all();
  lock.unlock();
  worker_->thread.join();
}

template <typename Result, typename Call>
Result DeadlineStore::run(const char* what, Milliseconds deadline, Call call) {
  deadline = std::min(deadline, t_guard_deadline);
  auto slot = std::make_shared<Slot<Result>>();
  Worker& worker = *worker_;
  std::unique_lock<std::mutex> lock(worker.mutex);
  if (worker.abandoned) {
    const auto waited = std::chrono::duration_cast<Milliseconds>(Clock::now() - worker.stuck_since);
    throw StoreNotAnswering("acc: " + whose_ + " has not answered for " + seconds_text(waited / 1000 * 1000) +
                            " (since this rank's " + worker.stuck_call +
                            " call): the rank that serves it is stopped (SIGSTOP, a debugger), its "
                            "machine is unreachable, or it is too busy to answer");
  }
  worker.tasks.push_back({[slot, inner = inner_, call] {
                            try {
                              slot->value.emplace(call(*inner));
                            } catch (...) {
                              slot->error = std::current_exception();
                            }
                          },
                          slot});
  worker.wake.notify_all();
  const bool finished = deadline == Milliseconds::max()
                            ? (worker.done.wait(lock, [&] { return slot->done; }), true)
                            : worker.done.wait_for(lock, deadline, [&] { return slot->done; });
  if (!finished) {
    if (worker.running && !slot->cancelled) {
      // Queued calls are cancelled below; the one in flight is this caller's unless the queue still
      // holds it, and a later caller must not wait behind it.
      const bool still_queued = std::any_of(worker.tasks.begin(), worker.tasks.end(),
                                            [&](const Task& t) { return t.slot == slot; });
      if (!still_queued && !worker.abandoned) {
        worker.abandoned = true;
        worker.stuck_call = what;
        worker.stuck_since = Clock::now() - deadline;
      }
    }
    slot->cancelled = true;
    throw StoreNotAnswering("acc: " + whose_ + " did not answer this rank's " + what + " call within " +
                            seconds_text(deadline) +
                            ": the rank that serves it is stopped (SIGSTOP, a debugger), its machine is "
                            "unreachable, or it is too busy to answer");
  }
  lock.unlock();
  if (slot->error) std::rethrow_exception(slot->error);
  return std::move(*slot->value);
}

namespace {
struct Nothing {};
}  // namespace

c10::intrusive_ptr<c10d::Store> DeadlineStore::clone() {
  return c10::make_intrusive<DeadlineStore>(inner_->clone(), deadline_, whose_);
}

void DeadlineStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  run<Nothing>("set", deadline_, [key, value](c10d::Store& s) {
    s.set(key, value);
    return Nothing{};
  });
}

std::vector<uint8_t> DeadlineStore::compareSet(const std::string& key, const std::vector<uint8_t>& current,
                                               const std::vector<uint8_t>& desired) {
  return run<std::vector<uint8_t>>("compare-set", deadline_, [key, current, desired](c10d::Store& s) {
    return s.compareSet(key, current, desired);
  });
}

std::vector<uint8_t> DeadlineStore::get(const std::string& key) {
  // c10d's get waits for the key up to the store's timeout, then asks the server.
  return run<std::vector<uint8_t>>("get", after(timeout_, deadline_), [key](c10d::Store& s) { return s.get(key); });
}

int64_t DeadlineStore::add(const std::string& key, int64_t value) {
  return run<int64_t>("add", deadline_, [key, value](c10d::Store& s) { return s.add(key, value); });
}

bool DeadlineStore::deleteKey(const std::string& key) {
  return run<bool>("delete", deadline_, [key](c10d::Store& s) { return s.deleteKey(key); });
}

bool DeadlineStore::check(const std::vector<std::string>& keys) {
  return run<bool>("check", deadline_, [keys](c10d::Store& s) { return s.check(keys); });
}

int64_t DeadlineStore::getNumKeys() {
  return run<int64_t>("key count", deadline_, [](c10d::Store& s) { return s.getNumKeys(); });
}

void DeadlineStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void DeadlineStore::wait(const std::vector<std::string>& keys, const Milliseconds& timeout) {
  // The store gives up on missing keys at `timeout` itself; the deadline covers its answer.
  run<Nothing>("wait", after(timeout, deadline_), [keys, timeout](c10d::Store& s) {
    s.wait(keys, timeout);
    return Nothing{};
  });
}

void DeadlineStore::append(const std::string& key, const std::vector<uint8_t>& value) {
  run<Nothing>("append", deadline_, [key, value](c10d::Store& s) {
    s.append(key, value);
    return Nothing{};
  });
}

std::vector<std::vector<uint8_t>> DeadlineStore::multiGet(const std::vector<std::string>& keys) {
  return run<std::vector<std::vector<uint8_t>>>("multi-get", after(timeout_, deadline_),
                                                [keys](c10d::Store& s) { return s.multiGet(keys); });
}

void DeadlineStore::multiSet(const std::vector<std::string>& keys, const std::vector<std::vector<uint8_t>>& values) {
  run<Nothing>("multi-set", deadline_, [keys, values](c10d::Store& s) {
    s.multiSet(keys, values);
    return Nothing{};
  });
}

void DeadlineStore::setTimeout(const Milliseconds& timeout) {
  c10d::Store::setTimeout(timeout);
  inner_->setTimeout(timeout);  // before the store is shared (c10d sets it while creating a backend)
}

bool DeadlineStore::hasExtendedApi() const { return inner_->hasExtendedApi(); }

}  // namespace acc::detail
