#include "fsdp/sharded_grad_clip.h"

#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <limits>

#include "comm/process_group.h"

namespace acc::detail {

double clip_sharded_grad_norm_(const std::vector<at::Tensor>& shard_grads, ProcessGroup& shard_group,
                               double max_norm, double norm_type) {
  c10::NoGradGuard no_grad;
  const bool inf_norm = std::isinf(norm_type);
  // Accumulated in double: one number per rank, then the sum (or max) over the shard group.
  auto options = at::TensorOptions().dtype(at::kDouble);
  if (!shard_grads.empty()) options = options.device(shard_grads.front().device());
  auto local = at::zeros({1}, options);
  for (const auto& g : shard_grads) {
    if (g.numel() == 0) continue;
    auto a = g.detach().abs().to(at::kDouble);
    if (inf_norm) {
      local = at::maximum(local, a.max().reshape({1}));
    } else {
      local += a.pow(norm_type).sum();
    }
  }
  shard_group.all_reduce_(local, inf_norm ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM,
                          "FSDP gradient norm");
  const double total = inf_norm ? local.item<double>() : std::pow(local.item<double>(), 1.0 / norm_type);
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient < 1.0) {
    for (const auto& g : shard_grads) g.mul_(coefficient);
  }
  return total;
}

}  // namespace acc::detail
