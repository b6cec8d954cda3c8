#pragma once
// The child side of acc::launch: what a forked rank does between fork() and _exit(). Torch-free
// (torch_in_rank.h does the two torch calls).
#include <sys/types.h>

#include <functional>
#include <vector>

#include "function_launcher/rank_environment.h"

namespace acc::detail {

struct RankStart {
  int rank = 0;
  pid_t caller = 0;            // the process that forked it, for the PR_SET_PDEATHSIG race
  int report_fd = -1;          // write end of the rank's pipe to the caller
  std::vector<int> close_fds;  // the caller's descriptors this rank must not hold open
  const RankEnvironment* environment = nullptr;
  int threads = 1;
  const std::function<void()>* fn = nullptr;
};

/// Runs in the child right after fork(): dies with the caller, becomes its own process group,
/// takes default signal handling and /dev/null as stdin, sets its environment and threads, runs
/// `fn`, reports how it ended, flushes stdout and stderr, and leaves with _exit (0 when `fn`
/// returned, 1 when it threw) so that none of the caller's destructors or atexit handlers run.
[[noreturn]] void run_rank(const RankStart& start);

}  // namespace acc::detail
