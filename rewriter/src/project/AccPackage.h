// Where the acc that this acc-migrate belongs to keeps its CMake package config: a migrated
// project's CMakeLists.txt calls find_package(acc), and the line that configures it must find this
// acc, not whichever one CMake would find first.
#pragma once
#include <string>

namespace accmigrate {

struct AccPackage {
  std::string dir;  // holds accConfig.cmake: the value of -Dacc_DIR; "" when there is none
  // When there is none: why, and the commands that install acc (a sentence), and the directory
  // that install will put it in (with "<prefix>" for a prefix the user chooses).
  std::string missing;
  std::string installedDir;
  // The libtorch acc was built against (its TorchConfig.cmake's directory, a value for -DTorch_DIR),
  // as the package config records it; "" when unknown or no longer there. A migrated project whose
  // own find_package(Torch) comes before find_package(acc) needs it on a fresh build directory, and
  // accConfig.cmake refuses a libtorch of another minor version.
  std::string torchDir;
};

// From acc-migrate's own location (`argv0`): an install (<prefix>/bin/acc-migrate) has it in
// <prefix>/<libdir>/cmake/acc, as acc's install rules put it (cmake/InstallRuntime.cmake); a build
// tree has none (its accConfig.cmake is written for the install), so acc must be installed first.
AccPackage findAccPackage(const char *argv0);

}  // namespace accmigrate
