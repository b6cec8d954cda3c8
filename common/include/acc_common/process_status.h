#pragma once
// How a rank ended, in the words both launchers use in their failure reports.
#include <string>

namespace acc::common {

// "SIGKILL" (or "signal N" where the C library has no name).
std::string signal_name(int sig);

// waitpid's status in words: "exited with code 3", "was killed by signal 9 (SIGKILL)".
std::string describe_wait_status(int wait_status);

// Whether that status is a failure: a non-zero exit, or death by a signal.
bool wait_status_failed(int wait_status);

}  // namespace acc::common
