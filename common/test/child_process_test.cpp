// The child-side primitives, each checked in a forked child that reports through its exit code.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <acc_common/child_process.h>
#include <acc_common/process_status.h>

#include <functional>

namespace {

using namespace acc::common;

// Runs `child` in a forked process; returns its wait status.
int in_child(const std::function<int()>& child) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(child());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(ChildProcess, StdinIsDevNullAndNoDescriptorLeaks) {
  const int status = in_child([] {
    int pipe_fds[2];  // stdin a pipe with a byte in it, whatever the test runner gave
    if (::pipe(pipe_fds) != 0 || ::write(pipe_fds[1], "x", 1) != 1) return 3;
    ::dup2(pipe_fds[0], STDIN_FILENO);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    const int before = ::open("/dev/null", O_RDONLY);  // the lowest free descriptor now
    ::close(before);
    stdin_from_dev_null();
    if (::fcntl(before, F_GETFD) != -1) return 1;  // the descriptor opened for it is closed again
    char byte;
    return ::read(STDIN_FILENO, &byte, 1) == 0 ? 0 : 2;  // end of file at once, not the pipe's byte
  });
  EXPECT_EQ(status, 0) << describe_wait_status(status);
}

// The runtime's copy closed its /dev/null descriptor after dup2 even when it was descriptor 0 itself.
TEST(ChildProcess, StdinThatWasClosedStaysOpen) {
  const int status = in_child([] {
    ::close(STDIN_FILENO);
    stdin_from_dev_null();
    char byte;
    return ::read(STDIN_FILENO, &byte, 1) == 0 ? 0 : 1;
  });
  EXPECT_EQ(status, 0) << describe_wait_status(status);
}

TEST(ChildProcess, SignalHandlingIsTheDefault) {
  const int status = in_child([] {
    ::signal(SIGUSR1, SIG_IGN);
    ::signal(SIGINT, SIG_IGN);
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    ::sigprocmask(SIG_BLOCK, &blocked, nullptr);
    reset_signal_handling();
    struct sigaction action {};
    for (int sig : {SIGUSR1, SIGINT}) {
      ::sigaction(sig, nullptr, &action);
      if (action.sa_handler != SIG_DFL) return 1;
    }
    sigset_t now;
    ::sigprocmask(SIG_BLOCK, nullptr, &now);
    return sigismember(&now, SIGTERM) ? 2 : 0;
  });
  EXPECT_EQ(status, 0) << describe_wait_status(status);
}

TEST(ChildProcess, DiesWithItsParent) {
  EXPECT_EQ(in_child([] { return die_with_parent(::getppid()) ? 0 : 1; }), 0);
  // A parent that is already gone: the child leaves at once, as if killed.
  const int status = in_child([] {
    die_with_parent(::getppid() + 1000000);
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGKILL);
}

TEST(ChildProcess, SignalReachesTheWholeGroup) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::pause();
    ::_exit(0);
  }
  ::setpgid(pid, pid);  // whichever runs first, the group exists before the signal
  signal_rank_group(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << describe_wait_status(status);
}

}  // namespace
