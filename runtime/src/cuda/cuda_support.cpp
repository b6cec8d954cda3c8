#include "cuda/cuda_support.h"

#include <acc/environment.h>
#include <acc/options.h>

#include <dlfcn.h>

#include <cstdlib>
#include <iostream>

namespace acc::detail {
namespace {

std::string env_value(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// A driver that dlopen can find is what the CUDA runtime itself needs; without one no GPU can be
// used and loading libtorch_cuda would only cost memory. The probe's reference is dropped, so the
// driver is not left loaded (launch/fork_safety.cpp reads a loaded driver as a sign of CUDA use).
bool gpu_driver_present() {
  for (const char* name : {"libcuda.so.1", "libcuda.so"}) {
    if (void* driver = ::dlopen(name, RTLD_LAZY | RTLD_LOCAL)) {
      ::dlclose(driver);
      return true;
    }
  }
  return false;
}

// libacc_cuda.so sits next to libacc (build tree and install alike).
std::string cuda_library_path() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&cuda_library_path), &info) == 0 || info.dli_fname == nullptr) {
    return "libacc_cuda.so";
  }
  std::string self = info.dli_fname;
  const auto slash = self.rfind('/');
  return (slash == std::string::npos ? std::string() : self.substr(0, slash + 1)) + "libacc_cuda.so";
}

CudaSupport load() {
  CudaSupport out;
  const std::string mode = env_value(env::kLoadCuda);
  if (mode == "0") {
    out.why_not = std::string(env::kLoadCuda) + "=0";
    return out;
  }
  if (mode != "1") {
    if (!mode.empty() && mode != "auto") {
      std::cerr << "acc: " << env::kLoadCuda << "='" << mode << "' is not 0, 1 or auto; using auto\n";
    }
    bool cpu = false;
    if (const std::string use_cpu = env_value(env::kUseCpu); !use_cpu.empty()) {
      try {
        cpu = parse_env_bool(env::kUseCpu, use_cpu);
      } catch (const std::exception&) {
        // A bad value is reported by the Accelerator that reads it, with the fix; not here.
      }
    }
    if (cpu) {
      out.why_not = std::string(env::kUseCpu) + " is set (acc-launch --cpu)";
      return out;
    }
    if (!gpu_driver_present()) {
      out.why_not = "no NVIDIA driver on this machine (libcuda.so.1 was not found)";
      return out;
    }
  }
#ifdef ACC_HAS_CUDA_LIBRARY
  const std::string path = cuda_library_path();
  // RTLD_GLOBAL: as if libtorch_cuda had been linked, which is what torch's own loaders do.
  if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* error = ::dlerror();
    out.why_not = "loading " + path + " failed: " + (error != nullptr ? error : "unknown error");
    std::cerr << "acc: this process may use a GPU, but acc's CUDA support did not load (" << out.why_not
              << "); it runs without CUDA. Reinstall acc so that libacc_cuda.so sits next to libacc.so, "
              << "or set " << env::kLoadCuda << "=0 to silence this.\n";
    return out;
  }
  out.loaded = true;
#else
  out.why_not = "this libacc was built against a libtorch without CUDA";
#endif
  return out;
}

}  // namespace

const CudaSupport& cuda_support() {
  static const CudaSupport support = load();
  return support;
}

namespace {
// Decided when libacc is loaded, before main and before anything asks ATen about CUDA.
[[maybe_unused]] const CudaSupport& decided_at_load = cuda_support();
}  // namespace

}  // namespace acc::detail
