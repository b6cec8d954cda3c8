#pragma once
// CPU memory for FULL_SHARD's whole units, which are gathered and released again and again: mapped
// from the kernel for each gather and unmapped at each release, so that released parameters really
// leave the process. From the ordinary allocator they would not: glibc keeps a freed block of a few
// MiB in the heap whenever anything allocated later sits above it, and a rank's resident memory
// then grows towards the whole model (measured: a rank that built a 48 MiB model empty kept 30 MiB
// of freed units resident after prepare).
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace acc::detail {

/// An uninitialised 1-D tensor of `numel` elements with `options`; on the CPU its storage maps and
/// unmaps its memory directly, and allocating it again after its data was dropped (the
/// StorageImpl's allocator) maps fresh memory. Other devices: at::empty.
at::Tensor empty_unit(int64_t numel, const at::TensorOptions& options);

}  // namespace acc::detail
