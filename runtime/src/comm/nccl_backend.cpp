// libacc_cuda.so's NCCL backend: the only translation unit that sees NCCL's headers, and the only
// one that links libtorch_cuda. It registers itself with libacc when libacc loads it
// (comm/cuda_support.cpp); CPU processes never load it.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "comm/process_group.h"

namespace acc::detail {
namespace {

c10::intrusive_ptr<c10d::Backend> make(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, Milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}

[[maybe_unused]] const bool registered = (register_nccl_backend(&make), true);

}  // namespace
}  // namespace acc::detail
