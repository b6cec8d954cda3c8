// The only translation unit that sees NCCL's headers. Built with -DUSE_C10D_NCCL when libtorch has
// CUDA, so the NCCL path compiles and links in every such build, GPU or not.
#include "comm/process_group.h"

#include <acc/errors.h>

#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace acc::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size, Milliseconds timeout) {
#ifdef USE_C10D_NCCL
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  throw DistributedError(
      "acc: CUDA training needs NCCL, but this libacc was built against a libtorch without CUDA; "
      "rebuild acc against a CUDA libtorch, or pass AcceleratorOptions().cpu(true)");
#endif
}

}  // namespace acc::detail
