// libacc refuses, when it is loaded, a libtorch whose minor version differs from the one it was
// compiled against: libtorch keeps no C++ ABI across minor releases, so such a process would crash
// or compute garbage far from the cause. accConfig.cmake refuses the same pairing at configure time;
// this catches what CMake never sees (pkg-config and Makefile builds, LD_LIBRARY_PATH, a program
// linked against another libtorch).
#pragma once
#include <string>

namespace acc::detail {

// The libtorch libacc was compiled against: TORCH_VERSION of the headers it was built with.
std::string compiled_torch_version();

// The libtorch this process runs with, as it reports itself: the TORCH_VERSION entry that
// libtorch_cpu compiled into its build options (caffe2::GetBuildOptions, the table
// torch.__config__.show() prints). Read from the library itself, so it is right whatever file name,
// folder or packaging (pip wheel, libtorch zip, source build) that library came with; "" when it
// has no such entry. `library` gets the file that answered (dladdr), "" if unknown.
std::string loaded_torch_version(std::string* library = nullptr);

// Why a libacc compiled against libtorch `compiled` cannot run with libtorch `loaded` (read from
// `library`), with the fix; "" when it can. The major.minor versions must be equal: a patch release
// is cut from the same release branch with targeted fixes and keeps the ABI (as libtorch's stable
// ABI targets major.minor too), and a local suffix (+cu130, +cpu, a0+git...) names the build, not the
// API. A version that cannot be read is not refused: there is nothing to name.
std::string torch_version_mismatch(const std::string& compiled, const std::string& loaded,
                                   const std::string& library);

}  // namespace acc::detail
