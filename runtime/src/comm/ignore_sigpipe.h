#pragma once
// SIGPIPE in a rank: a write to a connection whose peer has gone raises it, and its default action
// ends the process. acc's own sockets send with MSG_NOSIGNAL, but code in torch that a rank runs
// does not: Gloo's TCP pairs write with writev(2), and the TCPStore server on rank 0 (libuv) with
// write(2)/writev(2). That code is written for Python, which ignores SIGPIPE at startup, and expects
// EPIPE, which it turns into an error naming the peer. A C++ program keeps the default, so when one
// rank fails, a healthy rank writing to it died of signal 13 and the launcher blamed that rank.
//
// So the process group ignores SIGPIPE when it starts, as Python does, unless the program chose
// something itself: a handler it installed, or SIG_IGN, is left as it is. Ignoring is inherited
// across exec: a child this rank starts with system() or popen() ignores SIGPIPE too (as under
// Python); acc's own child processes restore the default (acc_common/child_process.h). Torch-free.
#include <signal.h>

namespace acc::detail {

/// Sets SIGPIPE to SIG_IGN if its action is the default; returns true if it changed it.
inline bool ignore_sigpipe_unless_handled() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) != 0) return false;
  const bool is_default = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL;
  if (!is_default) return false;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  return sigaction(SIGPIPE, &ignore, nullptr) == 0;
}

}  // namespace acc::detail
