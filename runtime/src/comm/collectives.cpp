#include <acc/collectives.h>
#include <acc/errors.h>
#include <acc/state.h>

#include <ATen/ops/cat.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/tensor.h>

#include <sstream>

#include "comm/process_group.h"

namespace acc {

namespace {
std::string shape_text(at::IntArrayRef sizes) {
  std::ostringstream out;
  out << sizes;
  return out.str();
}

// Shape, dtype and device class of every rank, so that mismatches are errors rather than
// garbage or a hang inside the backend.
void check_same_layout(detail::ProcessGroup& group, const at::Tensor& tensor,
                       const std::string& what) {
  std::ostringstream mine;
  mine << shape_text(tensor.sizes()) << " " << tensor.scalar_type();
  auto all = group.all_gather_strings(mine.str(), what + " (shape check)");
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      std::ostringstream message;
      message << "acc: " << what << " needs the same shape and dtype on every rank, but got";
      for (size_t k = 0; k < all.size(); ++k) message << (k ? ", " : " ") << "rank " << k << ": " << all[k];
      message << ". Pad first with accelerator.pad_across_processes(tensor) for tensors whose "
                 "first dimension differs.";
      throw DistributedError(message.str());
    }
  }
}
}  // namespace

at::Tensor gather(const at::Tensor& tensor) {
  auto input = tensor.dim() == 0 ? tensor.reshape({1}) : tensor;
  auto* group = PartialState().process_group();
  if (group == nullptr) return input;
  check_same_layout(*group, input, "gather");
  return at::cat(group->all_gather(input, "gather"), 0);
}

ReduceOp detail::reduce_op(const std::string& reduction) {
  if (reduction == "sum") return ReduceOp::SUM;
  if (reduction == "mean") return ReduceOp::MEAN;
  if (reduction == "max") return ReduceOp::MAX;
  throw ConfigError("acc: reduce(tensor, \"" + reduction +
                    "\"): unknown reduction; use \"sum\", \"mean\" or \"max\"");
}

at::Tensor reduce(const at::Tensor& tensor, const std::string& reduction, double scale) {
  return reduce(tensor, detail::reduce_op(reduction), scale);
}

double reduce_number(double value, ReduceOp op, double scale) {
  return reduce(at::scalar_tensor(value, at::kDouble), op, scale).item<double>();
}

at::Tensor reduce(const at::Tensor& tensor, ReduceOp op, double scale) {
  const char* name = op == ReduceOp::MAX ? "max" : op == ReduceOp::MEAN ? "mean" : "sum";
  auto result = tensor.clone();
  PartialState state;
  if (auto* group = state.process_group()) {
    group->all_reduce_(result, op == ReduceOp::MAX ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM,
                       std::string("reduce(") + name + ")");
    if (op == ReduceOp::MEAN) result.div_(state.num_processes());
  }
  if (scale != 1.0) result = result.mul(scale);  // out of place: integer tensors promote
  return result;
}

at::Tensor broadcast(const at::Tensor& tensor, int from_process) {
  PartialState state;
  if (from_process < 0 || from_process >= state.num_processes()) {
    throw ConfigError("acc: broadcast(from_process=" + std::to_string(from_process) +
                      ") is not a rank of this job (0.." + std::to_string(state.num_processes() - 1) +
                      ")");
  }
  auto* group = state.process_group();
  if (group == nullptr) return tensor;
  check_same_layout(*group, tensor, "broadcast");
  auto result = tensor.contiguous().clone();
  group->broadcast_(result, from_process, "broadcast");
  return result;
}

at::Tensor pad_across_processes(const at::Tensor& tensor, int64_t dim, double pad_index,
                                bool pad_first) {
  auto* group = PartialState().process_group();
  if (group == nullptr || tensor.dim() == 0) return tensor;
  if (dim < 0) dim += tensor.dim();
  if (dim < 0 || dim >= tensor.dim()) {
    throw ConfigError("acc: pad_across_processes: dim " + std::to_string(dim) +
                      " is out of range for a tensor with " + std::to_string(tensor.dim()) +
                      " dimensions");
  }
  auto size = at::tensor({tensor.size(dim)}, at::TensorOptions().dtype(at::kLong));
  group->all_reduce_(size, c10d::ReduceOp::MAX, "pad_across_processes (size exchange)");
  const int64_t missing = size.item<int64_t>() - tensor.size(dim);
  if (missing == 0) return tensor;
  // constant_pad_nd takes (before, after) pairs starting from the last dimension.
  std::vector<int64_t> pad(2 * (tensor.dim() - dim), 0);
  pad[pad.size() - (pad_first ? 2 : 1)] = missing;
  return at::constant_pad_nd(tensor, pad, pad_index);
}

}  // namespace acc
