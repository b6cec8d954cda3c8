// libacc's end of libacc_cuda.so (cuda/cuda_module.cpp), which registers itself when it loads.
#include <acc/errors.h>

#include "cuda/cuda_support.h"
#include "comm/process_group.h"

namespace acc::detail {
namespace {
// Constant-initialized: libacc_cuda.so registers while libacc may still be running its own
// static initializers (it is loaded from one of them).
CudaModule cuda_module{nullptr, nullptr};

const CudaModule& loaded_cuda_module() {
  if (cuda_module.make_nccl == nullptr) {
    throw DistributedError(
        "acc: CUDA training needs NCCL, which is in acc's CUDA support (libacc_cuda.so), and it was "
        "not loaded: " + cuda_support().why_not +
        ". Set ACC_LOAD_CUDA=1 to load it whenever libacc loads, or pass "
        "AcceleratorOptions().cpu(true) to train on CPU");
  }
  return cuda_module;
}
}  // namespace

void register_cuda_module(const CudaModule& module) { cuda_module = module; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, Milliseconds timeout) {
  return loaded_cuda_module().make_nccl(store, rank, size, timeout);
}

std::string gpu_uuid(int device_index) { return loaded_cuda_module().gpu_uuid(device_index); }

}  // namespace acc::detail
