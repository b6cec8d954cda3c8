#include <acc_common/process_status.h>

#include <string.h>
#include <sys/wait.h>

namespace acc::common {

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with code " + std::to_string(WEXITSTATUS(wait_status));
  const int sig = WTERMSIG(wait_status);
  return "was killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
}

bool wait_status_failed(int wait_status) { return !WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0; }

}  // namespace acc::common
