#pragma once
// Runs the ranks of this machine to the end: output, failure handling, signals, restarts.
#include <string>
#include <vector>

#include "launch_plan.h"

namespace acc::launcher {

struct SupervisorOptions {
  std::vector<std::string> program;  // program and its arguments
  int max_restarts = 0;
  double monitor_interval_s = 0.1;  // longest sleep between checks of the deadlines
  double grace_period_s = 5.0;  // SIGTERM to SIGKILL
  double heartbeat_timeout_s = 30.0;  // several machines: a machine silent this long is lost (machine_link.h)
  double join_timeout_s = 600.0;  // machines other than 0: how long to wait for machine 0's acc-launch
  std::string log_dir;  // empty: no log files
  int tee = 0;  // with log_dir: 0 none, 1 stdout, 2 stderr, 3 both also go to the console
  bool quiet = false;
  std::string tool_name = "acc-launch";  // in front of the launcher's own messages
};

// Starts plan.local_world_size ranks with their environments and supervises them:
// - a rank that exits non-zero or dies from a signal makes the others get SIGTERM, then SIGKILL after
//   the grace period; the failure (rank, exit code or signal, last lines) is reported on stderr;
// - SIGINT, SIGTERM, SIGHUP and SIGQUIT are forwarded to every rank (a second one kills them at once);
// - with max_restarts, the whole group is started again after a failure;
// - with several machines, the launchers keep each other alive (machine_link.h): a lost machine stops
//   this machine's ranks (and counts as a failure for max_restarts), and machines other than 0 start
//   each attempt with machine 0's restart count.
// Returns the exit status for acc-launch: 0, the first failed rank's exit code (128+N for signal N),
// 128+N when acc-launch itself was stopped by signal N, or 126/127 when the program cannot be executed.
int supervise(const LaunchPlan& plan, const SupervisorOptions& options, const EnvMap& base_env);

}  // namespace acc::launcher
