#include "project/AccPackage.h"

#include "project/RealPath.h"
#include "project/ShellQuote.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace accmigrate {
namespace {

bool hasConfig(const std::string &dir) {
  return fs::exists(dir + "/accConfig.cmake") || fs::exists(dir + "/acc-config.cmake");
}

// <prefix>/<libdir>/cmake/acc, as cmake/InstallRuntime.cmake installs it (an absolute libdir as is).
std::string configDirUnder(const std::string &prefix) {
  llvm::StringRef libdir = ACC_INSTALL_LIBDIR;
  return (path::is_absolute(libdir) ? libdir.str() : prefix + "/" + libdir.str()) + "/cmake/acc";
}

// The Torch_DIR acc was built against: accConfig.cmake's line `set(acc_TORCH_DIR "<dir>")`
// (cmake/accConfig.cmake.in writes it on a line of its own for this reader), if <dir> still exists.
std::string recordedTorchDir(const std::string &configDir) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file = llvm::MemoryBuffer::getFile(configDir + "/accConfig.cmake");
  if (!file) return "";
  llvm::SmallVector<llvm::StringRef, 64> lines;
  (*file)->getBuffer().split(lines, '\n');
  for (llvm::StringRef line : lines) {
    line = line.trim();
    if (!line.consume_front("set(acc_TORCH_DIR \"") || !line.consume_back("\")")) continue;
    return !line.empty() && fs::is_directory(line) ? line.str() : "";
  }
  return "";
}

// The package found in `dir`.
AccPackage foundIn(const std::string &dir) {
  AccPackage package;
  package.dir = dir;
  package.torchDir = recordedTorchDir(dir);
  return package;
}

}  // namespace

AccPackage findAccPackage(const char *argv0) {
  AccPackage package;
  std::string exe = fs::getMainExecutable(argv0, reinterpret_cast<void *>(&findAccPackage));
  std::string bin = realPathOr(path::parent_path(exe).str());
  std::string build = realPathOr(ACC_BUILD_DIR);
  if (bin == realPathOr(ACC_BUILD_BIN_DIR)) {
    // A build tree: its accConfig.cmake (runtime/) includes the accTargets.cmake only an install has.
    for (const std::string &dir : {build, build + "/runtime"})
      if (hasConfig(dir) && fs::exists(dir + "/accTargets.cmake")) return foundIn(dir);
    package.installedDir = configDirUnder("<prefix>");
    std::string install = "cmake --install " + shellQuote(build) + " --prefix <prefix>";
    package.missing =
        ACC_WITH_RUNTIME
            ? "this acc-migrate runs from acc's build tree " + build +
                  ", which has no acc package for CMake (acc's is made for an install): install acc first, `" +
                  install + "`"
            : "this acc-migrate runs from acc's build tree " + build +
                  ", configured without acc's runtime (-DACC_BUILD_RUNTIME=OFF): build acc with it and install it "
                  "first, `cmake -S " +
                  shellQuote(ACC_SOURCE_DIR) + " -B " + shellQuote(build) +
                  " -DACC_BUILD_RUNTIME=ON && cmake --build " + shellQuote(build) + " && " + install + "`";
    return package;
  }
  // An install: <prefix>/<bindir>/acc-migrate.
  llvm::StringRef bindir = ACC_INSTALL_BINDIR;
  std::string prefix = path::parent_path(bin).str();
  if (!path::is_absolute(bindir) && llvm::StringRef(bin).endswith("/" + bindir.str()))
    prefix = bin.substr(0, bin.size() - bindir.size() - 1);
  std::string dir = configDirUnder(prefix);
  if (hasConfig(dir)) return foundIn(dir);
  package.installedDir = dir;
  package.missing = "acc's package is not installed beside this acc-migrate (no " + dir +
                    "/accConfig.cmake): install acc's runtime into " + prefix +
                    " first, `cmake --install <acc build> --prefix " + shellQuote(prefix) +
                    "` (from a build of acc with -DACC_BUILD_RUNTIME=ON)";
  return package;
}

}  // namespace accmigrate
