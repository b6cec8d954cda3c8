#include "test_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

namespace acc::launcher::testing {

Process::Process(const std::vector<std::string>& argv, const Options& options) : timeout_s_(options.timeout_s) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry = *e;
    env[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
  }
  for (const auto& [name, value] : options.env) {
    if (value) env[name] = *value;
    else env.erase(name);
  }
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int out[2], err[2], in[2];
  if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(in, O_CLOEXEC)) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(127);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  setpgid(pid_, pid_);
  close(out[1]);
  close(err[1]);
  close(in[0]);
  (void)!write(in[1], options.stdin_text.data(), options.stdin_text.size());
  close(in[1]);
  out_fd_ = out[0];
  err_fd_ = err[0];
}

Process::~Process() {
  if (!reaped_) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) close(out_fd_);
  if (err_fd_ >= 0) close(err_fd_);
}

void Process::signal(int sig) const { kill(pid_, sig); }

void Process::pump(int timeout_ms) {
  pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
  if (poll(fds, 2, timeout_ms) <= 0) return;
  int* fd_of[2] = {&out_fd_, &err_fd_};
  std::string* text_of[2] = {&out_, &err_};
  for (int i = 0; i < 2; ++i) {
    if (!fds[i].revents) continue;
    char buffer[4096];
    const ssize_t got = read(*fd_of[i], buffer, sizeof(buffer));
    if (got > 0) {
      text_of[i]->append(buffer, static_cast<size_t>(got));
    } else {
      close(*fd_of[i]);
      *fd_of[i] = -1;
    }
  }
}

bool Process::wait_for_output(const std::string& needle, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (out_.find(needle) != std::string::npos || err_.find(needle) != std::string::npos) return true;
    if (out_fd_ < 0 && err_fd_ < 0) return false;
    pump(50);
  }
  return false;
}

Finished Process::wait() {
  Finished result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
  while ((out_fd_ >= 0 || err_fd_ >= 0) && std::chrono::steady_clock::now() < deadline) pump(50);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    usleep(10000);
  }
  reaped_ = true;
  result.exit_code = result.timed_out ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = out_;
  result.err = err_;
  return result;
}

Finished run(const std::vector<std::string>& argv, const Options& options) { return Process(argv, options).wait(); }

bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  // Field 3, after "pid (comm) ": Z is a zombie.
  const size_t close_paren = line.rfind(')');
  return close_paren != std::string::npos && line.size() > close_paren + 2 && line[close_paren + 2] != 'Z';
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

namespace {
namespace fs = std::filesystem;

// Removes `dir` and everything below it. Tests make folders read-only (an unwritable config), so
// each folder gets its owner's rights back first; symbolic links are removed, never followed (tests
// plant them where acc-launch writes, pointing at files it must not touch).
void remove_tree(const fs::path& dir) {
  std::error_code error;
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, error);
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, error), end;
       !error && it != end; it.increment(error)) {
    if (it->symlink_status(error).type() == fs::file_type::directory)
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, error);
  }
  fs::remove_all(dir, error);
}

// The folders temp_dir made, removed when the test process exits (ctest runs each test in a process of
// its own), so that a run leaves nothing in the temporary directory. ACC_KEEP_TEST_DIRS=1 keeps them
// for a look after a failure. Only the process that made them removes them, not a forked child.
class MadeDirs {
 public:
  void add(const fs::path& dir) { dirs_.push_back(dir); }
  ~MadeDirs() {
    if (getpid() != owner_ || std::getenv("ACC_KEEP_TEST_DIRS") != nullptr) return;
    for (const fs::path& dir : dirs_) remove_tree(dir);
  }

 private:
  pid_t owner_ = getpid();
  std::vector<fs::path> dirs_;
};

MadeDirs& made_dirs() {
  static MadeDirs dirs;
  return dirs;
}
}  // namespace

std::string temp_dir(const std::string& name) {
  const char* base = std::getenv("TMPDIR");
  const auto dir = fs::path(base ? base : "/tmp") / ("acc-launcher-test-" + std::to_string(getpid()) + "-" + name);
  remove_tree(dir);
  fs::create_directories(dir);
  made_dirs().add(dir);
  return dir.string();
}

}  // namespace acc::launcher::testing
