#pragma once
// Collectives over tensors and nested structures of tensors (see tensor_tree.h), on the
// process-wide state. On one process each is the identity (gather of a 0-d tensor still gives [1]).
// Every call must be made by all ranks in the same order.
#include <ATen/core/Tensor.h>

#include <string>

#include <acc/tensor_tree.h>

namespace acc {

/// All-gather, concatenated on dim 0 in rank order; 0-d tensors become shape [1]. Shapes must
/// agree on every rank (see pad_across_processes); a mismatch throws naming each rank's shape.
at::Tensor gather(const at::Tensor& tensor);
/// The element-wise reductions over ranks of reduce().
enum class ReduceOp { SUM, MEAN, MAX };

/// Element-wise reduction over ranks, then multiplied by `scale`.
at::Tensor reduce(const at::Tensor& tensor, ReduceOp op, double scale = 1.0);
/// The same with Accelerate's names: "sum", "mean" or "max" (ConfigError otherwise).
at::Tensor reduce(const at::Tensor& tensor, const std::string& reduction = "sum",
                  double scale = 1.0);
/// Rank `from_process`'s tensor, on every rank (same shape and dtype everywhere).
at::Tensor broadcast(const at::Tensor& tensor, int from_process = 0);
/// Pads `dim` to the largest size over ranks with `pad_index`, at the end (or the start).
at::Tensor pad_across_processes(const at::Tensor& tensor, int64_t dim = 0, double pad_index = 0,
                                bool pad_first = false);

template <typename T>
T gather(const T& tree) {
  return map_tensors(tree, [](const at::Tensor& t) { return gather(t); });
}
template <typename T>
T reduce(const T& tree, ReduceOp op, double scale = 1.0) {
  return map_tensors(tree, [&](const at::Tensor& t) { return reduce(t, op, scale); });
}
template <typename T>
T reduce(const T& tree, const std::string& reduction = "sum", double scale = 1.0) {
  return map_tensors(tree, [&](const at::Tensor& t) { return reduce(t, reduction, scale); });
}
template <typename T>
T broadcast(const T& tree, int from_process = 0) {
  return map_tensors(tree, [&](const at::Tensor& t) { return broadcast(t, from_process); });
}
template <typename T>
T pad_across_processes(const T& tree, int64_t dim = 0, double pad_index = 0,
                       bool pad_first = false) {
  return map_tensors(
      tree, [&](const at::Tensor& t) { return pad_across_processes(t, dim, pad_index, pad_first); });
}

}  // namespace acc
