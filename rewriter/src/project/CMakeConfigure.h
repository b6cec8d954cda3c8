// A compile database for a CMake project that has none: the project configured into a temporary
// build directory (no build: only CMake's configure step, which writes compile_commands.json).
#pragma once
#include <string>
#include <vector>

namespace accmigrate {

struct Configured {
  std::string dir;    // the build directory holding compile_commands.json (the caller removes it); "" on failure
  std::string error;  // on failure: CMake's first error lines, or why it did not run
  // What the configure did not find, for the advice on a header that is then missing: package names
  // from its output ("Could NOT find X", a config file "provided by "X"") and the cache entries it
  // left *-NOTFOUND (a QUIET find_package prints nothing: Eigen3_DIR, EIGEN3_INCLUDE_DIR).
  std::vector<std::string> packagesNotFound;
  std::vector<std::string> entriesNotFound;
};

// Configures the project in `top` into a temporary directory with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
// (Ninja when there is one) and `cacheArgs` (-DTorch_DIR=..., the user's package locations),
// killing CMake after `timeoutSeconds`.
Configured configureCMake(const std::string &top, const std::vector<std::string> &cacheArgs, unsigned timeoutSeconds);

}  // namespace accmigrate
