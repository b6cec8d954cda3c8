#include "output/DeadWriter.h"

#include <llvm/ADT/StringExtras.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>

namespace accmigrate {
namespace {

// A temporary is written in seconds (a PCH, a source file) or minutes (a large data file copied into
// --output-dir), and its mtime moves with every write: one untouched for a day has no writer left.
constexpr std::chrono::hours kTemporaryLifetime(24);

}  // namespace

const std::string &hostTag() {
  static const std::string tag = [] {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0 || !name[0]) return std::string("unknown-host");
    std::string out(name);
    for (char &c : out)
      if (!llvm::isAlnum(c) && c != '-') c = '-';
    return out;
  }();
  return tag;
}

std::string writerTag(long pid) { return hostTag() + "." + std::to_string(pid); }

std::optional<std::string> deadWriter(const std::optional<Writer> &writer, llvm::sys::TimePoint<> modified) {
  if (std::chrono::system_clock::now() - modified > kTemporaryLifetime) return std::string("it is over a day old");
  // Another machine's pid cannot be asked about; a name without a writer has only its age.
  if (!writer || writer->host != hostTag()) return std::nullopt;
  std::string process = "process " + std::to_string(writer->pid) + " of this machine";
  // Never a process's (kill(0) would ask about this process group, kill(-1) about every process).
  if (writer->pid <= 0 || writer->pid > INT_MAX) return process + " cannot exist";
  // EPERM: a process of another user has that pid, alive.
  if (::kill(static_cast<pid_t>(writer->pid), 0) != 0 && errno == ESRCH) return process + " has exited";
  return std::nullopt;
}

}  // namespace accmigrate
