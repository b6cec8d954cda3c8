#include "project/UserBuild.h"

#include "project/RealPath.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <algorithm>
#include <set>

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace accmigrate {
namespace {

bool inside(const std::string &p, const std::string &dir) {
  llvm::StringRef s(p);
  return s == dir || (s.startswith(dir) && path::is_separator(s[dir.size()]));
}

const CacheEntry *entry(const std::vector<CacheEntry> &cache, llvm::StringRef name) {
  for (const CacheEntry &e : cache)
    if (e.name == name) return &e;
  return nullptr;
}

// CMake's own entries that carry over: they only say where find_package, find_path and
// find_library look, and the toolchain file, where conan and vcpkg put their packages' locations (a
// cross toolchain names the compiler the user's compile_commands.json would name too). CMake's other
// entries describe the build, not where packages are (install prefix, build type, flags, the
// compiler and tools it found for itself), and the temporary configure keeps its own.
const std::set<llvm::StringRef> kSearchEntries = {"CMAKE_PREFIX_PATH",    "CMAKE_MODULE_PATH",  "CMAKE_INCLUDE_PATH",
                                                  "CMAKE_LIBRARY_PATH",   "CMAKE_PROGRAM_PATH", "CMAKE_FRAMEWORK_PATH",
                                                  "CMAKE_FIND_ROOT_PATH", "CMAKE_SYSROOT",      "CMAKE_TOOLCHAIN_FILE"};

// Whether `e` is a location the user's configure knew of a package (or a tool) and acc-migrate's
// configure may use: set by the user or by a find_* call (not CMake's INTERNAL/STATIC bookkeeping,
// nor a *-NOTFOUND result), every item an existing absolute path, none inside the user's build
// directory (its own products: FetchContent's sources and builds, export()ed configs; carrying
// FETCHCONTENT_BASE_DIR would even make the temporary configure write into it). <Pkg>_DIR,
// <Pkg>_ROOT, *_INCLUDE_DIR, *_LIBRARY, CMAKE_PREFIX_PATH... all pass this way; an option or a
// string (ON, Release, -O2) never does.
bool isPackageLocation(const CacheEntry &e, const std::string &buildDir) {
  if (e.type == "INTERNAL" || e.type == "STATIC" || e.value.empty()) return false;
  if (llvm::StringRef(e.name).startswith("CMAKE_") && !kSearchEntries.count(e.name)) return false;
  if (e.name == "FETCHCONTENT_BASE_DIR") return false;
  llvm::SmallVector<llvm::StringRef, 4> items;
  llvm::StringRef(e.value).split(items, ';', -1, /*KeepEmpty=*/false);
  if (items.empty()) return false;
  for (llvm::StringRef item : items)
    if (!path::is_absolute(item) || !fs::exists(item) || inside(realPathOr(item.str()), buildDir)) return false;
  return true;
}

std::string cacheArg(const CacheEntry &e) {
  bool typed = e.type == "PATH" || e.type == "FILEPATH" || e.type == "STRING";
  return "-D" + e.name + (typed ? ":" + e.type : std::string()) + "=" + e.value;
}

}  // namespace

std::vector<CacheEntry> readCMakeCache(const std::string &file) {
  std::vector<CacheEntry> entries;
  auto buffer = llvm::MemoryBuffer::getFile(file);
  if (!buffer) return entries;
  llvm::SmallVector<llvm::StringRef, 256> lines;
  (*buffer)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.rtrim("\r");
    if (line.empty() || line.startswith("//") || line.startswith("#")) continue;
    CacheEntry e;
    size_t colon;
    if (line.startswith("\"")) {  // "NAME WITH SPACES":TYPE=VALUE
      size_t close = line.find('"', 1);
      if (close == llvm::StringRef::npos) continue;
      e.name = line.slice(1, close).str();
      colon = close + 1;
      if (colon >= line.size() || line[colon] != ':') continue;
    } else {
      colon = line.find(':');
      if (colon == llvm::StringRef::npos) continue;
      e.name = line.take_front(colon).str();
    }
    size_t equals = line.find('=', colon);
    if (equals == llvm::StringRef::npos) continue;
    e.type = line.slice(colon + 1, equals).str();
    e.value = line.drop_front(equals + 1).str();
    entries.push_back(std::move(e));
  }
  return entries;
}

std::optional<UserBuild> findUserBuild(const std::string &top) {
  std::vector<std::string> candidates;
  auto addChildren = [&](const std::string &dir, bool all) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
      llvm::StringRef name = path::filename(it->path());
      if (all || name == "build" || name.startswith("build-") || name.startswith("cmake-build-") || name == "out")
        candidates.push_back(it->path());
    }
  };
  addChildren(top, false);
  addChildren(top + "/out/build", true);
  std::sort(candidates.begin(), candidates.end());  // directory order is the file system's

  std::string realTop = realPathOr(top);
  std::optional<UserBuild> best;
  llvm::sys::TimePoint<> bestTime;
  for (const std::string &dir : candidates) {
    std::string cacheFile = dir + "/CMakeCache.txt";
    fs::file_status status;
    if (fs::status(cacheFile, status) || !fs::is_regular_file(status)) continue;
    UserBuild build{realPathOr(dir), fs::exists(dir + "/compile_commands.json"), readCMakeCache(cacheFile)};
    const CacheEntry *home = entry(build.cache, "CMAKE_HOME_DIRECTORY");
    if (!home || realPathOr(home->value) != realTop) continue;  // another project's build
    llvm::sys::TimePoint<> time = status.getLastModificationTime();
    if (!best || (build.hasCompileCommands && !best->hasCompileCommands) ||
        (build.hasCompileCommands == best->hasCompileCommands && time > bestTime)) {
      best = std::move(build);
      bestTime = time;
    }
  }
  return best;
}

PackageHints packageHints(const UserBuild &build) {
  PackageHints hints;
  for (const CacheEntry &e : build.cache)
    if (isPackageLocation(e, build.dir)) {
      hints.cacheArgs.push_back(cacheArg(e));
      hints.names.push_back(e.name);
    }
  // vcpkg's toolchain in manifest mode installs the manifest's packages into the build directory
  // while configuring: in a temporary directory, everything again. Reading the user's installed
  // tree instead (vcpkg's own switches for it) is what their configure found.
  const CacheEntry *toolchain = entry(build.cache, "CMAKE_TOOLCHAIN_FILE");
  const CacheEntry *installed = entry(build.cache, "VCPKG_INSTALLED_DIR");
  if (toolchain && path::filename(toolchain->value) == "vcpkg.cmake" && installed &&
      fs::is_directory(installed->value)) {
    for (const char *name : {"VCPKG_INSTALLED_DIR", "VCPKG_TARGET_TRIPLET"})
      if (const CacheEntry *e = entry(build.cache, name)) {
        if (std::find(hints.names.begin(), hints.names.end(), e->name) != hints.names.end()) continue;
        hints.cacheArgs.push_back(cacheArg(*e));
        hints.names.push_back(e->name);
      }
    hints.cacheArgs.push_back("-DVCPKG_MANIFEST_INSTALL=OFF");
    hints.names.push_back("VCPKG_MANIFEST_INSTALL=OFF");
  }
  return hints;
}

}  // namespace accmigrate
