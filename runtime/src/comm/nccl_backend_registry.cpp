// libacc's end of the NCCL backend: libacc_cuda.so registers the factory when it loads.
#include <acc/errors.h>

#include "comm/process_group.h"
#include "comm/cuda_support.h"

namespace acc::detail {
namespace {
// Constant-initialized: libacc_cuda.so registers while libacc may still be running its own
// static initializers (it is loaded from one of them).
NcclBackendFactory nccl_factory = nullptr;
}  // namespace

void register_nccl_backend(NcclBackendFactory factory) { nccl_factory = factory; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, Milliseconds timeout) {
  if (nccl_factory == nullptr) {
    throw DistributedError(
        "acc: CUDA training needs NCCL, which is in acc's CUDA support (libacc_cuda.so), and it was "
        "not loaded: " + cuda_support().why_not +
        ". Set ACC_LOAD_CUDA=1 to load it whenever libacc loads, or pass "
        "AcceleratorOptions().cpu(true) to train on CPU");
  }
  return nccl_factory(store, rank, size, timeout);
}

}  // namespace acc::detail
