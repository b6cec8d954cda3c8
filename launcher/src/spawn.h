#pragma once
// Starting one rank: fork, tie the child's life to the launcher, exec the program directly (no shell).
#include <sys/types.h>

#include <string>
#include <vector>

namespace acc::launcher {

struct SpawnRequest {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH like a shell would
  std::vector<std::string> envp;  // "NAME=value"
  int stdout_fd = -1;  // -1: inherit the launcher's
  int stderr_fd = -1;
  int inherit_fd = -1;  // a close-on-exec descriptor the program keeps (rank 0's store socket)
};

struct SpawnResult {
  pid_t pid = -1;  // also the id of the rank's own process group
  int exec_errno = 0;  // non-zero: exec failed and the child has already exited
};

// The child:
// - gets SIGKILL when the launcher dies, however it dies (PR_SET_PDEATHSIG, checked against the race
//   where the launcher dies before the call);
// - leads its own process group, so that signals reach the rank and everything it started, and the
//   terminal's Ctrl-C reaches it once, through the launcher;
// - reads /dev/null as stdin (a background process group reading the terminal would stop forever);
// - starts with the default signal mask and dispositions, whatever the launcher blocked or ignored.
SpawnResult spawn(const SpawnRequest& request);

}  // namespace acc::launcher
