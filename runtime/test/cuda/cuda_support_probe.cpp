// Prints what this process loaded of CUDA, for cuda_support_test.cpp, which runs it under different
// ACC_LOAD_CUDA / ACCELERATE_USE_CPU settings. One line per fact: key=value.
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/cuda.h>

#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include "comm/process_group.h"
#include "cuda/cuda_support.h"

namespace {

// The basenames of mapped CUDA-side libraries: libcu*, libnccl*, libnvshmem*, torch's and c10's CUDA parts.
std::string mapped_cuda_libraries() {
  std::ifstream maps("/proc/self/maps");
  std::set<std::string> names;
  for (std::string line; std::getline(maps, line);) {
    const auto slash = line.rfind('/');
    if (slash == std::string::npos) continue;
    const std::string name = line.substr(slash + 1);
    for (const char* prefix : {"libcu", "libnccl", "libnvshmem", "libtorch_cuda", "libc10_cuda", "libtorch_nvshmem"}) {
      if (name.rfind(prefix, 0) == 0) names.insert(name);
    }
  }
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
  return out;
}

}  // namespace

int main() {
  const auto& support = acc::detail::cuda_support();
  std::cout << "loaded=" << support.loaded << "\n"
            << "why_not=" << support.why_not << "\n"
            << "mapped=" << mapped_cuda_libraries() << "\n"
            << "cuda_available=" << torch::cuda::is_available() << "\n";
  std::string nccl = "constructed";
  try {
    acc::detail::make_nccl_backend(c10::make_intrusive<c10d::HashStore>(), 0, 1,
                                   std::chrono::milliseconds(1000));
  } catch (const std::exception& e) {
    nccl = e.what();
    nccl = nccl.substr(0, nccl.find('\n'));
  }
  std::cout << "nccl=" << nccl << std::endl;
  return 0;
}
