#include "stopped_process.h"

#include <dirent.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace acc::launcher {
namespace {

struct ProcessState {
  char state = '?';
  pid_t group = -1;
};

// /proc/PID/stat is "pid (comm) state ppid pgrp ...", where comm may hold spaces and parentheses: the
// fields are counted from the last ')'.
std::optional<ProcessState> read_state(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!file || !std::getline(file, text)) return std::nullopt;
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 1));
  ProcessState state;
  long parent = 0, group = 0;
  if (!(fields >> state.state >> parent >> group)) return std::nullopt;
  state.group = static_cast<pid_t>(group);
  return state;
}

std::optional<StoppedProcess> stopped(pid_t pid, const ProcessState& state) {
  if (state.state == 'T') return StoppedProcess{pid, false};
  if (state.state == 't') return StoppedProcess{pid, true};
  return std::nullopt;
}

}  // namespace

std::optional<StoppedProcess> find_stopped(pid_t rank_pid) {
  const auto own = read_state(rank_pid);
  if (!own) return std::nullopt;
  if (auto found = stopped(rank_pid, *own)) return found;
  // Only reached when a rank's peers failed: one pass over /proc is cheap then.
  DIR* proc = ::opendir("/proc");
  if (!proc) return std::nullopt;
  std::optional<StoppedProcess> found;
  while (const dirent* entry = ::readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(entry->d_name[0]))) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(entry->d_name));
    const auto state = read_state(pid);
    if (pid == rank_pid || !state || state->group != rank_pid) continue;
    if ((found = stopped(pid, *state))) break;
  }
  ::closedir(proc);
  return found;
}

const char* describe_stop(const StoppedProcess& stopped) {
  return stopped.traced ? "stopped by a debugger or tracer" : "stopped (SIGSTOP or a debugger)";
}

}  // namespace acc::launcher
