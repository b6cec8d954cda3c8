#include "function_launcher/fork_safety.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>

#include <atomic>

namespace acc::detail {
namespace {
std::atomic<bool> launched_rank{false};
}  // namespace

bool cuda_initialized() {
  // RTLD_NOLOAD: a handle only if the driver library is already loaded; it is never loaded here.
  void* driver = nullptr;
  for (const char* name : {"libcuda.so.1", "libcuda.so"}) {
    if ((driver = ::dlopen(name, RTLD_LAZY | RTLD_NOLOAD)) != nullptr) break;
  }
  if (driver == nullptr) return false;
  // Loaded is not yet initialized: before cuInit every driver call but a few answers
  // CUDA_ERROR_NOT_INITIALIZED (3) and does nothing else. CUDA_SUCCESS means cuInit ran.
  using DeviceGetCount = int (*)(int*);
  auto device_get_count = reinterpret_cast<DeviceGetCount>(::dlsym(driver, "cuDeviceGetCount"));
  int devices = 0;
  const bool initialized = device_get_count == nullptr || device_get_count(&devices) == 0;
  ::dlclose(driver);  // drops the reference dlopen just took
  return initialized;
}

int thread_count() {
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  int count = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count;
}

int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int count = CPU_COUNT(&set);
  return count > 0 ? count : 1;
}

void mark_launched_rank() { launched_rank.store(true); }
bool is_launched_rank() { return launched_rank.load(); }

}  // namespace acc::detail
