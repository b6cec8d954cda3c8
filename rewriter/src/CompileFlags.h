// Where compiler flags come from: compile_commands.json when there is one, otherwise flags inferred
// for libtorch (the torch include directories and -std=c++17), plus the user's `-- <args>`.
#pragma once
#include "Options.h"

#include <clang/Tooling/CompilationDatabase.h>
#include <memory>
#include <string>

namespace accmigrate {

struct CompileFlags {
  ~CompileFlags();  // removes temporaryBuildDir
  std::unique_ptr<clang::tooling::CompilationDatabase> database;
  std::string description;  // one line for the user: where the flags came from
  std::string temporaryBuildDir;  // a CMake configure made for this run; its commands run there
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
