#pragma once
// Gradient clipping when each rank holds a shard of the gradients (FSDP SHARD_GRAD_OP): the norm
// is global, summed over the ranks that split the parameters.
#include <ATen/core/Tensor.h>

#include <vector>

namespace acc::detail {

class ProcessGroup;

/// torch.nn.utils.clip_grad_norm_ over the union of every rank's `shard_grads`; returns the
/// total norm (the same on every rank of `shard_group`).
double clip_sharded_grad_norm_(const std::vector<at::Tensor>& shard_grads, ProcessGroup& shard_group,
                               double max_norm, double norm_type);

}  // namespace acc::detail
