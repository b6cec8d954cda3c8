#pragma once
// Running the launcher's executables from tests: capture both streams and the exit status, with a hard
// timeout after which the whole process group is killed, so a broken launcher fails a test instead of
// hanging it, and never leaves processes behind.
#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace acc::launcher::testing {

struct Finished {
  int exit_code = -1;  // 128+N when killed by signal N; -1 when the timeout killed it
  std::string out;
  std::string err;
  bool timed_out = false;
};

struct Options {
  std::map<std::string, std::optional<std::string>> env;  // overrides; nullopt removes the variable
  std::string stdin_text;
  std::string cwd;  // empty: the test's own
  double timeout_s = 30;
};

// Starts a program in its own process group; the caller may signal it before waiting.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const Options& options = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // Reads its output until it exits or the timeout passes (then its group is killed).
  Finished wait();
  // What it printed so far (reads available output without blocking for long); for waiting on a phase.
  bool wait_for_output(const std::string& needle, double timeout_s);

 private:
  void pump(int timeout_ms);
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  double timeout_s_;
  std::string out_, err_;
  bool reaped_ = false;
};

Finished run(const std::vector<std::string>& argv, const Options& options = {});

// True while a process with this pid exists (zombies count as gone).
bool alive(pid_t pid);

std::string read_text(const std::string& path);

// A fresh empty directory under the test's temporary directory ($TMPDIR, else /tmp), removed with all
// it holds when the test process exits (ACC_KEEP_TEST_DIRS=1 keeps it).
std::string temp_dir(const std::string& name);

}  // namespace acc::launcher::testing
