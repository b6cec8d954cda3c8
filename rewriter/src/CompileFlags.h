// Where compiler flags come from: compile_commands.json when there is one, otherwise flags inferred
// for libtorch (the torch include directories and -std=c++17), plus the user's `-- <args>`.
#pragma once
#include "Options.h"

#include <clang/Tooling/CompilationDatabase.h>
#include <memory>
#include <string>

namespace accmigrate {

struct CompileFlags {
  std::unique_ptr<clang::tooling::CompilationDatabase> database;
  std::string description;  // one line for the user: where the flags came from
};

// Builds the database for `inputs`. On a usage error (an unreadable -p), returns null with `error`.
std::unique_ptr<CompileFlags> makeCompileFlags(const Options &options, const char *argv0, std::string &error);

// The torch include directories to use when inferring flags (empty when not found).
std::vector<std::string> torchIncludeDirs(const Options &options);

}  // namespace accmigrate
