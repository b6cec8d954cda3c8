#include "RealTorch.h"

#include "project/PchCache.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <cstdlib>

namespace fs = llvm::sys::fs;

namespace accmigrate {
namespace test {
namespace {

struct RealTorch {
  std::vector<std::string> args;
  std::string error;
};

// The venv's torch/include (lib/python3.*/site-packages/torch/include), or "".
std::string venvTorchInclude() {
  const char *env = std::getenv("ACC_VENV");
  const char *home = std::getenv("HOME");
  std::string venv = env ? env : (home ? std::string(home) + "/.cache/acc/venv" : "");
  std::error_code ec;
  for (fs::directory_iterator it(venv + "/lib", ec), end; it != end && !ec; it.increment(ec)) {
    std::string include = it->path() + "/site-packages/torch/include";
    if (fs::is_directory(include + "/torch/csrc/api/include")) return include;
  }
  return "";
}

RealTorch find() {
  RealTorch torch;
  std::string include = venvTorchInclude();
  if (include.empty()) {
    torch.error = "no torch headers under $ACC_VENV or ~/.cache/acc/venv (run scripts/setup)";
    return torch;
  }
  // What a user's file gets from acc-migrate's inferred flags: torch, then acc as installed (the
  // runtime's headers, the contract's acc/environment.h and the acc/version.h that a runtime build
  // generates, written for the tests by CMake).
  std::vector<std::string> flags = {"-std=c++17",
                                    "-isystem", include,
                                    "-isystem", include + "/torch/csrc/api/include",
                                    "-isystem", ACC_SOURCE_DIR "/runtime/include",
                                    "-isystem", ACC_SOURCE_DIR "/contract",
                                    "-isystem", ACC_TEST_GENERATED_INCLUDE_DIR};
  // The PCH of <torch/torch.h> for these flags, in the cache the lit tests use (the key differs: the
  // flags do). Built by the first test process of the build tree, loaded by all the others.
  PchCache cache(ACC_TEST_PCH_CACHE_DIR, {});
  clang::tooling::CompileCommand command;
  command.Directory = ACC_TEST_PCH_CACHE_DIR;  // the PCH is built there: any existing directory works
  command.CommandLine = {"clang-tool"};
  command.CommandLine.insert(command.CommandLine.end(), flags.begin(), flags.end());
  if (std::error_code ec = fs::create_directories(ACC_TEST_PCH_CACHE_DIR)) {
    torch.error = std::string("cannot create ") + ACC_TEST_PCH_CACHE_DIR + ": " + ec.message();
    return torch;
  }
  std::string pch = cache.pchFor(command);
  if (pch.empty()) {
    torch.error = "the venv's <torch/torch.h> (" + include + ") did not compile into a precompiled header";
    return torch;
  }
  torch.args = flags;
  torch.args.insert(torch.args.end(), {"-resource-dir=" ACC_CLANG_RESOURCE_DIR, "-include-pch", pch});
  return torch;
}

const RealTorch &realTorch() {
  static const RealTorch torch = find();
  return torch;
}

}  // namespace

const std::vector<std::string> &realTorchArgs() { return realTorch().args; }
const std::string &realTorchError() { return realTorch().error; }

}  // namespace test
}  // namespace accmigrate
