// Where compiler flags come from: compile_commands.json when there is one (-p, found above the
// inputs, or in the user's own build directory of the CMake project), else a temporary configure of
// that project (with the package locations of the user's build directory), otherwise flags inferred
// for libtorch (the torch include directories and -std=c++17); plus the user's `-- <args>`.
#pragma once
#include "cli/Options.h"

#include <clang/Tooling/CompilationDatabase.h>
#include <memory>
#include <set>
#include <string>

namespace accmigrate {

// A find_package call of the project that found nothing in acc-migrate's configure of it.
struct MissedPackage {
  std::string name;
  std::string file;  // the CMakeLists.txt calling it
  unsigned line = 0;
};

struct CompileFlags {
  ~CompileFlags();  // removes temporaryBuildDir
  std::unique_ptr<clang::tooling::CompilationDatabase> database;
  std::string description;  // one line for the user: where the flags came from
  std::string temporaryBuildDir;  // a CMake configure made for this run; its commands run there

  // Where the sources' flags came from, for the advice on a file that then does not parse.
  enum class Origin { Database, Configured, Inferred };
  Origin origin = Origin::Inferred;
  std::string databaseDir;   // Database: the directory of its compile_commands.json
  std::set<std::string> databaseFiles;  // the files the database lists (others get inferred flags)
  std::string projectTop;    // the CMake project around the sources (cmake::Project::enclosing); "" when none
  std::string userBuildDir;  // the user's build directory of that project; "" when there is none
  std::vector<std::string> carried;  // names of the package locations carried from it into the configure
  std::string configureError;        // the configure failed (Inferred): CMake's first error lines
  std::vector<MissedPackage> missedPackages;
};

// Builds the database for `sources` (of options.inputs): -p, a compile_commands.json found above the
// inputs, a temporary configure of the CMake project that builds them, else inferred flags. On a
// usage error (an unreadable -p), returns null with `error`.
std::unique_ptr<CompileFlags> makeCompileFlags(const Options &options, const std::vector<std::string> &sources,
                                               const char *argv0, std::string &error);

// The -DTorch_DIR= for configuring a project: the user's Torch_DIR, else none when CMAKE_PREFIX_PATH
// is set, else the torch found for inferred flags.
std::vector<std::string> torchCacheArgs(const Options &options);

// The torch include directories to use when inferring flags (empty when not found).
std::vector<std::string> torchIncludeDirs(const Options &options);

}  // namespace accmigrate
