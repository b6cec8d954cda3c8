#include "function_launcher/rank_process.h"

#include <signal.h>
#include <unistd.h>

#include <acc_common/child_process.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "function_launcher/fork_safety.h"
#include "function_launcher/rank_report.h"
#include "function_launcher/torch_in_rank.h"

namespace acc::detail {
namespace {

void write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the caller is gone: nobody to tell
    done += static_cast<size_t>(n);
  }
}

[[noreturn]] void leave(int code) {
  std::cout.flush();
  std::cerr.flush();
  std::clog.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace

void run_rank(const RankStart& start) {
  mark_launched_rank();
  if (!common::die_with_parent(start.caller)) ::_exit(128 + SIGKILL);
  // Its own process group, so that stopping the rank stops what it starts too. The caller sets it
  // as well: whichever runs first, the group exists before anyone signals it.
  ::setpgid(0, 0);
  // Default signal handling, as a freshly executed program has (the caller's handlers are for the
  // caller: a REPL's SIGINT handler must not keep a rank alive).
  common::reset_signal_handling();
  common::stdin_from_dev_null();
  for (int fd : start.close_fds) ::close(fd);

  for (const auto& name : start.environment->unset) ::unsetenv(name.c_str());
  for (const auto& [name, value] : start.environment->set) ::setenv(name.c_str(), value.c_str(), 1);

  RankReport report;
  try {
    set_intra_op_threads(start.threads);
    (*start.fn)();
  } catch (...) {
    report.threw = true;
    report.error = exception_text(std::current_exception());
  }
  report.ended = std::chrono::steady_clock::now();
  write_all(start.report_fd, encode_report(report));
  ::close(start.report_fd);
  leave(report.threw ? 1 : 0);
}

}  // namespace acc::detail
