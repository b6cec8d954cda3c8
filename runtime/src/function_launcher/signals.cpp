#include "function_launcher/signals.h"

#include <atomic>

namespace acc::detail {
namespace {
// Lock-free, so the handler may touch it (checked below).
std::atomic<int> interrupts{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void count_interrupt(int) { interrupts.fetch_add(1); }
}  // namespace

ChildStatusScope::ChildStatusScope() {
  if (::sigaction(SIGCHLD, nullptr, &saved_) != 0) return;
  if (saved_.sa_handler == SIG_IGN || (saved_.sa_flags & SA_NOCLDWAIT)) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    changed_ = ::sigaction(SIGCHLD, &dfl, nullptr) == 0;
  }
}

ChildStatusScope::~ChildStatusScope() {
  if (changed_) ::sigaction(SIGCHLD, &saved_, nullptr);
}

InterruptScope::InterruptScope() {
  interrupts.store(0);
  if (::sigaction(SIGINT, nullptr, &saved_) != 0 || saved_.sa_handler == SIG_IGN) return;
  struct sigaction counting {};
  counting.sa_handler = count_interrupt;  // no SA_RESTART: a wait returns early with EINTR
  sigemptyset(&counting.sa_mask);
  installed_ = ::sigaction(SIGINT, &counting, nullptr) == 0;
}

InterruptScope::~InterruptScope() {
  if (installed_) ::sigaction(SIGINT, &saved_, nullptr);
}

int InterruptScope::count() const { return interrupts.load(); }

void redeliver_interrupt() { ::raise(SIGINT); }

}  // namespace acc::detail
