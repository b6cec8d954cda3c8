// A compile database for a CMake project that has none: the project configured into a temporary
// build directory (no build: only CMake's configure step, which writes compile_commands.json).
#pragma once
#include <string>
#include <vector>

namespace accmigrate {

// Configures the project in `top` into a new temporary directory with
// -DCMAKE_EXPORT_COMPILE_COMMANDS=ON (Ninja when there is one) and `cacheArgs` (-DTorch_DIR=...),
// killing CMake after `timeoutSeconds`. Returns the directory (the caller removes it), or "" with
// `error`: CMake's first error lines, or why it did not run.
std::string configureCMake(const std::string &top, const std::vector<std::string> &cacheArgs, unsigned timeoutSeconds,
                           std::string &error);

}  // namespace accmigrate
