#include "spawn.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <acc_common/child_process.h>

namespace acc::launcher {
namespace {

std::vector<char*> pointers(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void fail_in_child(int status_fd) {
  const int error = errno;
  (void)!::write(status_fd, &error, sizeof(error));
  ::_exit(127);
}

}  // namespace

SpawnResult spawn(const SpawnRequest& request) {
  // Everything the child needs is prepared before fork().
  std::vector<char*> argv = pointers(request.argv);
  std::vector<char*> envp = pointers(request.envp);
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) return {-1, errno};
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) {
    const int error = errno;
    ::close(status_pipe[0]);
    ::close(status_pipe[1]);
    return {-1, error};
  }
  if (pid == 0) {
    ::close(status_pipe[0]);
    if (!common::die_with_parent(parent)) fail_in_child(status_pipe[1]);
    // A session of its own (which is also a process group of its own, signalled as one), as torchrun
    // does: where the kernel shares CPU time by session (autogroup), each rank gets its own share
    // instead of all ranks sharing the launcher's one against everything else on the machine.
    ::setsid();
    common::reset_signal_handling();
    common::stdin_from_dev_null();
    if (request.stdout_fd >= 0) ::dup2(request.stdout_fd, STDOUT_FILENO);
    if (request.stderr_fd >= 0) ::dup2(request.stderr_fd, STDERR_FILENO);
    if (request.inherit_fd >= 0) ::fcntl(request.inherit_fd, F_SETFD, 0);
    ::execvpe(argv[0], argv.data(), envp.data());
    fail_in_child(status_pipe[1]);
  }

  // The group exists before anyone signals it: the child calls setsid() before exec, and this
  // function returns only after exec (or its failure). Setting it from here too would race: setsid()
  // fails in a process that already leads a group.
  ::close(status_pipe[1]);
  SpawnResult result{pid, 0};
  // Blocks until exec succeeds (the close-on-exec pipe closes: read returns 0) or fails (the errno).
  ssize_t got;
  do {
    got = ::read(status_pipe[0], &result.exec_errno, sizeof(result.exec_errno));
  } while (got < 0 && errno == EINTR);
  if (got <= 0) result.exec_errno = 0;
  ::close(status_pipe[0]);
  return result;
}

}  // namespace acc::launcher
