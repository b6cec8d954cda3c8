#include <acc/warnings.h>

#include <iostream>
#include <mutex>
#include <set>
#include <utility>

namespace acc {
namespace {

struct Warnings {
  std::mutex mutex;
  WarningHandler handler = [](const std::string& message) { std::cerr << message << std::endl; };
  std::set<std::string> reported;
  int local_rank = -1;
};

Warnings& warnings() {
  static Warnings* instance = new Warnings();  // never destroyed: warnings may come during exit
  return *instance;
}

}  // namespace

WarningHandler set_warning_handler(WarningHandler handler) {
  auto& w = warnings();
  std::lock_guard<std::mutex> lock(w.mutex);
  return std::exchange(w.handler, std::move(handler));
}

namespace detail {

void warn(const std::string& message) {
  auto& w = warnings();
  WarningHandler handler;
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    if (w.local_rank > 0 || !w.handler || !w.reported.insert(message).second) return;
    handler = w.handler;
  }
  handler(message);  // outside the lock: a handler may warn again
}

void set_warning_local_rank(int local_rank) {
  auto& w = warnings();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.local_rank = local_rank;
}

}  // namespace detail
}  // namespace acc
