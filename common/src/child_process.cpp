#include <acc_common/child_process.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <initializer_list>

namespace acc::common {

bool die_with_parent(pid_t parent) {
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return false;
  // The parent may have died before prctl took effect: then the parent is already someone else.
  if (::getppid() != parent) ::_exit(128 + SIGKILL);
  return true;
}

void reset_signal_handling() {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
}

void stdin_from_dev_null() {
  // Without O_CLOEXEC: where stdin was closed, /dev/null becomes descriptor 0 itself and must stay.
  // Nothing else runs in the child between open and close.
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd > STDIN_FILENO) {
    ::dup2(null_fd, STDIN_FILENO);
    ::close(null_fd);
  }
}

void signal_rank_group(pid_t pid, int sig) {
  if (::kill(-pid, sig) != 0) ::kill(pid, sig);
}

}  // namespace acc::common
