#pragma once
// Whether a rank is stopped: the launcher is the one process that can tell a stopped rank (SIGSTOP,
// Ctrl-Z of a job, a debugger holding it) from a busy one, and when its peers time out waiting for it,
// that rank is the failure to report (issue 35, item 8). Linux: /proc/<pid>/stat.
#include <sys/types.h>

#include <optional>

namespace acc::launcher {

struct StoppedProcess {
  pid_t pid = -1;       // the stopped process: the rank itself, or a process of its group (a rank started
                        // through a shell script is the script; the training program is its child)
  bool traced = false;  // state 't': held by a debugger or tracer, not by a signal
};

// The rank's process when it is stopped, else the first stopped process of its process group (a rank leads
// a group of its own); nullopt when none is, or the rank is gone.
std::optional<StoppedProcess> find_stopped(pid_t rank_pid);

// "stopped (SIGSTOP or a debugger)" / "stopped by a debugger or tracer".
const char* describe_stop(const StoppedProcess& stopped);

}  // namespace acc::launcher
