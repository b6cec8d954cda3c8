#include "spawn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace acc::testing {

bool SpawnResult::all_succeeded() const {
  if (timed_out) return false;
  for (const auto& r : ranks) {
    if (r.signal != 0 || r.exit_code != 0) return false;
  }
  return true;
}

std::string SpawnResult::describe() const {
  std::ostringstream out;
  if (timed_out) out << "(timed out after " << elapsed.count() << " ms; ranks were killed)\n";
  for (size_t r = 0; r < ranks.size(); ++r) {
    out << "---- rank " << r << ": ";
    if (ranks[r].signal) {
      out << "killed by signal " << ranks[r].signal;
    } else {
      out << "exit " << ranks[r].exit_code;
    }
    out << " ----\n" << ranks[r].output;
  }
  return out.str();
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("could not bind a loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string executable_dir() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw std::runtime_error("readlink(/proc/self/exe) failed");
  path[n] = '\0';
  std::string full(path);
  return full.substr(0, full.rfind('/'));
}

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}
}  // namespace

SpawnResult spawn_ranks(const std::string& program, const std::vector<std::string>& args,
                        int num_ranks, std::chrono::milliseconds deadline,
                        const std::map<std::string, std::string>& env, int first_rank) {
  const int port = free_port();
  const auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int rank = first_rank; rank < first_rank + num_ranks; ++rank) {
    std::map<std::string, std::string> vars;
    for (char** e = environ; *e; ++e) {
      std::string entry(*e);
      auto eq = entry.find('=');
      if (eq != std::string::npos) vars[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    vars["RANK"] = std::to_string(rank);
    vars["LOCAL_RANK"] = std::to_string(rank);
    vars["WORLD_SIZE"] = std::to_string(first_rank + num_ranks);
    vars["LOCAL_WORLD_SIZE"] = std::to_string(first_rank + num_ranks);
    vars["MASTER_ADDR"] = "127.0.0.1";
    vars["MASTER_PORT"] = std::to_string(port);
    vars["OMP_NUM_THREADS"] = "1";
    for (const auto& [k, v] : env) vars[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : vars) env_strings.push_back(k + "=" + v);

    char log_template[] = "/tmp/acc-rank-XXXXXX";
    int log_fd = ::mkstemp(log_template);
    if (log_fd < 0) throw std::runtime_error("mkstemp failed");
    logs.emplace_back(log_template);

    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the test dying takes its ranks with it
      if (::getppid() != parent) ::_exit(127);
      ::dup2(log_fd, 1);
      ::dup2(log_fd, 2);
      std::vector<char*> argv{const_cast<char*>(program.c_str())};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      std::vector<char*> envp;
      for (auto& s : env_strings) envp.push_back(s.data());
      envp.push_back(nullptr);
      ::execve(program.c_str(), argv.data(), envp.data());
      std::fprintf(stderr, "execve %s: %s\n", program.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    ::close(log_fd);
    pids.push_back(pid);
  }

  SpawnResult result;
  result.ranks.resize(num_ranks);
  std::vector<bool> done(num_ranks, false);
  int remaining = num_ranks;
  while (remaining > 0) {
    for (int r = 0; r < num_ranks; ++r) {
      if (done[r]) continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        done[r] = true;
        --remaining;
        if (WIFSIGNALED(status)) result.ranks[r].signal = WTERMSIG(status);
        if (WIFEXITED(status)) result.ranks[r].exit_code = WEXITSTATUS(status);
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() - start > deadline) {
      result.timed_out = true;
      for (int r = 0; r < num_ranks; ++r) {
        if (!done[r]) ::kill(-pids[r], SIGKILL);
      }
      for (int r = 0; r < num_ranks; ++r) {
        if (done[r]) continue;
        int status = 0;
        ::waitpid(pids[r], &status, 0);
        result.ranks[r].signal = SIGKILL;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  for (int r = 0; r < num_ranks; ++r) {
    result.ranks[r].output = read_file(logs[r]);
    std::remove(logs[r].c_str());
  }
  return result;
}

}  // namespace acc::testing
