#pragma once
// The caller's signal handling while acc::launch runs, changed for the duration of one call only
// and put back as it was. Torch-free.
#include <signal.h>

namespace acc::detail {

/// Lets acc::launch collect its own children's exit statuses: a program that ignores SIGCHLD (or
/// sets SA_NOCLDWAIT) has children reaped by the kernel, and waitpid would never see them. While
/// this lives, SIGCHLD has its default disposition.
class ChildStatusScope {
 public:
  ChildStatusScope();
  ~ChildStatusScope();
  ChildStatusScope(const ChildStatusScope&) = delete;
  ChildStatusScope& operator=(const ChildStatusScope&) = delete;

 private:
  struct sigaction saved_ {};
  bool changed_ = false;
};

/// Counts SIGINTs while it lives instead of letting them act, so that Ctrl-C stops the ranks first.
/// A program that ignores SIGINT keeps ignoring it. After the destructor the caller's handling is
/// back; redeliver() then lets the program handle one SIGINT as it would have.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  /// SIGINTs received since construction.
  int count() const;

 private:
  struct sigaction saved_ {};
  bool installed_ = false;
};

/// Raises SIGINT in this thread, handled as the program now handles it.
void redeliver_interrupt();

}  // namespace acc::detail
