#pragma once
// Collectives over tensors and nested structures of tensors (see tensor_tree.h), on the
// process-wide state. On one process each is the identity (gather of a 0-d tensor still gives [1]).
// Every call must be made by all ranks in the same order.
#include <ATen/core/Tensor.h>

#include <cmath>
#include <string>
#include <type_traits>

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

/// A number reduced over ranks (reduce() of a 0-d double tensor on the CPU, whatever the backend).
double reduce_number(double value, ReduceOp op, double scale = 1.0);

namespace detail {
template <typename T>
constexpr bool is_number_v = std::is_arithmetic_v<T> && !std::is_same_v<T, bool>;
ReduceOp reduce_op(const std::string& reduction);  // "sum", "mean", "max"; ConfigError otherwise
}  // namespace detail

template <typename T>
T gather(const T& tree) {
  return map_tensors(tree, [](const at::Tensor& t) { return gather(t); });
}
template <typename T, std::enable_if_t<!detail::is_number_v<T>, int> = 0>
T reduce(const T& tree, ReduceOp op, double scale = 1.0) {
  return map_tensors(tree, [&](const at::Tensor& t) { return reduce(t, op, scale); });
}
template <typename T, std::enable_if_t<!detail::is_number_v<T>, int> = 0>
T reduce(const T& tree, const std::string& reduction = "sum", double scale = 1.0) {
  return map_tensors(tree, [&](const at::Tensor& t) { return reduce(t, reduction, scale); });
}

/// A count or a running loss that each rank accumulated over its share of the batches, reduced
/// over ranks in its own type: `correct = accelerator.reduce(correct, "sum");` (what acc-migrate
/// writes after a loader loop). Computed in double (integers exact up to 2^53, then rounded back).
template <typename T, std::enable_if_t<detail::is_number_v<T>, int> = 0>
T reduce(T value, ReduceOp op, double scale = 1.0) {
  const double reduced = reduce_number(static_cast<double>(value), op, scale);
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(std::llround(reduced));
  } else {
    return static_cast<T>(reduced);
  }
}
template <typename T, std::enable_if_t<detail::is_number_v<T>, int> = 0>
T reduce(T value, const std::string& reduction = "sum", double scale = 1.0) {
  return reduce(value, detail::reduce_op(reduction), scale);
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
