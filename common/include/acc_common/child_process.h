#pragma once
// What a rank does right after fork(), whoever forked it: acc-launch before exec'ing the program,
// acc::launch before running a function. Async-signal-safe calls only: the parent may have had other
// threads. And the parent's side: stopping a rank and everything it started.
#include <sys/types.h>

namespace acc::common {

// Makes the kernel SIGKILL this process when `parent` dies, however it dies (PR_SET_PDEATHSIG). If the
// parent died before the call took effect, the process exits at once (128 + SIGKILL). Returns false with
// errno set when prctl fails.
bool die_with_parent(pid_t parent);

// The signal mask and the dispositions a freshly started program has: whatever the parent blocked,
// caught or ignored (a REPL's SIGINT handler, a launcher's blocked SIGCHLD) must not follow the rank.
void reset_signal_handling();

// Reads /dev/null as stdin: a rank outside the terminal's foreground group that read the terminal
// would stop forever (SIGTTIN). The descriptor opened for it does not leak into the rank.
void stdin_from_dev_null();

// Sends `sig` to the process group `pid` leads (the rank and what it started), or to `pid` alone if the
// group is gone or not yet formed.
void signal_rank_group(pid_t pid, int sig);

}  // namespace acc::common
