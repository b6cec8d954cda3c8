#include "program_path.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include <acc_common/path_kind.h>

#include "errors.h"

namespace acc::launcher {

std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (common::inspect_path(candidate).regular() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

void check_program_file(const std::string& program, const std::string& fix) {
  if (program.empty()) throw UsageError("the program is an empty string; " + fix);
  // A name without '/' is only ever a file found in PATH, which find_program checked.
  if (program.find('/') == std::string::npos) return;
  const common::PathKind kind = common::inspect_path(program);
  if (!kind.exists() || kind.regular()) return;
  throw UsageError("'" + program + "' is " + kind.description() + ", not a program; " + fix);
}

}  // namespace acc::launcher
