// A compile database written for GCC, made acceptable to clang's driver: options clang does not know
// (-fno-fat-lto-objects, -fconcepts-diagnostics-depth=2...) would make it reject the whole command,
// and -fopenmp would leave <omp.h>, which GCC ships in its own include directory, unfound.
#pragma once
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace accmigrate {

class GccFlags {
 public:
  // `command` (compiler first) without the options clang's driver does not know; with -fopenmp, GCC's
  // include directory after all others (for <omp.h> only: clang's own headers come first). The first
  // time an option is dropped, says so on stderr. Thread-safe.
  std::vector<std::string> forClang(const std::vector<std::string> &command);

 private:
  std::string gccIncludeDir(const std::string &compiler);  // "" when GCC is not there
  std::mutex mutex_;
  std::set<std::string> reported_;
  std::optional<std::string> gccInclude_;
};

}  // namespace accmigrate
