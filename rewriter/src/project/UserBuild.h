// The user's own build of a CMake project: a build directory below the project's top that holds a
// CMakeCache.txt (build/, build-*, cmake-build-* as CLion names them, out/ and out/build/* as Visual
// Studio does). Its compile_commands.json is the best source of flags there is; without one, its
// cache still knows where the project's packages are (CMAKE_PREFIX_PATH, <Pkg>_DIR...), which
// acc-migrate's own configure of the project would otherwise miss.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace accmigrate {

struct CacheEntry {
  std::string name, type, value;  // NAME:TYPE=VALUE
};

// The entries of a CMakeCache.txt (comments skipped); empty when it cannot be read.
std::vector<CacheEntry> readCMakeCache(const std::string &file);

struct UserBuild {
  std::string dir;  // absolute
  bool hasCompileCommands = false;
  std::vector<CacheEntry> cache;
};

// The user's build directory of the project whose top CMakeLists.txt is in `top` (its cache's
// CMAKE_HOME_DIRECTORY is `top`): one with a compile_commands.json first, else the one configured
// last. nullopt when there is none.
std::optional<UserBuild> findUserBuild(const std::string &top);

// The -D arguments that carry the build's package locations into another configure of the project,
// and the names of the entries they carry (for the user). See the .cpp for what is carried and why.
struct PackageHints {
  std::vector<std::string> cacheArgs;
  std::vector<std::string> names;
};
PackageHints packageHints(const UserBuild &build);

}  // namespace accmigrate
