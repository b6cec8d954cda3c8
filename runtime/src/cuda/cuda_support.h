#pragma once
// libacc links libtorch_cpu only. Its CUDA part, libacc_cuda.so (NCCL, and through libtorch_cuda
// cuBLAS, cuDNN and the rest: ~235 MB resident and ~0.1 s per process), is loaded when libacc is
// loaded and only where this process may use a GPU. It must be that early: ATen asks for its CUDA
// hooks once and keeps the answer, so libtorch_cuda loaded after the first CUDA query would be
// ignored for the life of the process (torch::cuda::is_available() stays false).
#include <string>

namespace acc::detail {

struct CudaSupport {
  bool loaded = false;
  std::string why_not;  // when not loaded: the reason, phrased to follow "CUDA support was not loaded: "
};

/// Decided once, when libacc is loaded (ACC_LOAD_CUDA, ACCELERATE_USE_CPU, the GPU driver).
const CudaSupport& cuda_support();

}  // namespace acc::detail
