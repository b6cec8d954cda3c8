// libacc_cuda.so: the only translation unit that sees NCCL's and CUDA's headers, and the only one
// that links libtorch_cuda. It registers the NCCL backend and the GPU identity query with libacc
// when libacc loads it (cuda/cuda_support.cpp); CPU processes never load it.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <cstdio>

#include "comm/process_group.h"

namespace acc::detail {
namespace {

c10::intrusive_ptr<c10d::Backend> make_nccl(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                            int size, Milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}

// The GPU's UUID as nvidia-smi -L prints it (GPU-8-4-4-4-12 hex digits): the same physical GPU
// has the same UUID in every process, whatever CUDA_VISIBLE_DEVICES renumbers it to.
std::string gpu_uuid(int device_index) {
  const auto& bytes = at::cuda::getDeviceProperties(static_cast<c10::DeviceIndex>(device_index))->uuid.bytes;
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(bytes[i]));
    text += hex;
    if (i == 3 || i == 5 || i == 7 || i == 9) text += '-';
  }
  return text;
}

[[maybe_unused]] const bool registered = (register_cuda_module({&make_nccl, &gpu_uuid}), true);

}  // namespace
}  // namespace acc::detail
