#include "core/torch_version_check.h"

#include <caffe2/core/common.h>
#include <dlfcn.h>
#include <torch/version.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <utility>

namespace acc::detail {
namespace {

// "2.11.0", "2.11.0+cu130", "2.12.0a0+git1234" -> {2, 11}; nullopt when it does not start so.
std::optional<std::pair<long, long>> major_minor(const std::string& version) {
  const char* p = version.c_str();
  char* end = nullptr;
  const long major = std::strtol(p, &end, 10);
  if (end == p || *end != '.') return std::nullopt;
  p = end + 1;
  const long minor = std::strtol(p, &end, 10);
  if (end == p) return std::nullopt;
  return std::make_pair(major, minor);
}

// Runs before libacc's own static initializers (priority 101 < the default), after libtorch's
// (a dependency is initialized first), so nothing of libacc touches a libtorch it cannot use. A
// constructor cannot throw to anyone: the message goes to stderr and the process ends, as the
// dynamic loader ends one whose library does not fit. (A libtorch that lacks a data symbol libacc
// refers to fails in the loader before this runs, with its own "undefined symbol" message.)
__attribute__((constructor(101))) void refuse_another_libtorch() {
  std::string library;
  const std::string loaded = loaded_torch_version(&library);
  const std::string error = torch_version_mismatch(compiled_torch_version(), loaded, library);
  if (error.empty()) return;
  std::fprintf(stderr, "%s\n", error.c_str());
  std::fflush(stderr);
  std::_Exit(EXIT_FAILURE);
}

}  // namespace

std::string compiled_torch_version() { return TORCH_VERSION; }

std::string loaded_torch_version(std::string* library) {
  if (library != nullptr) {
    Dl_info info{};
    const auto* function = reinterpret_cast<const void*>(&caffe2::GetBuildOptions);
    *library = dladdr(function, &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : "";
  }
  const auto& options = caffe2::GetBuildOptions();
  const auto entry = options.find("TORCH_VERSION");
  return entry == options.end() ? std::string() : entry->second;
}

std::string torch_version_mismatch(const std::string& compiled, const std::string& loaded,
                                   const std::string& library) {
  const auto built = major_minor(compiled);
  const auto running = major_minor(loaded);
  if (!built || !running || *built == *running) return "";
  const std::string series = std::to_string(built->first) + "." + std::to_string(built->second);
  return "acc: libacc was built against libtorch " + compiled + ", but this process loaded libtorch " +
         loaded + (library.empty() ? std::string() : " (" + library + ")") +
         "; libtorch's C++ ABI changes between minor versions, so libacc cannot run with it. Fix: run "
         "with libtorch " + series + ".x, the one acc was built against (" ACC_BUILT_TORCH_LIBDIR
         "): build your program against it (Torch_DIR, or pkg-config's acc.pc) and keep another "
         "libtorch out of LD_LIBRARY_PATH; or rebuild and reinstall acc against libtorch " + loaded + ".";
}

}  // namespace acc::detail
