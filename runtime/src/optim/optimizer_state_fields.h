#pragma once
// The state libtorch's optimizers keep per parameter, seen field by field: checkpoints store the
// tensors apart from the rest, and FSDP slices and gathers them. libtorch exposes the fields only
// as TORCH_ARG members of each optimizer's ParamState type, so this is the one place that knows
// them.
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <utility>
#include <vector>

namespace acc::detail {

/// The fields of one parameter's state, by reference (TORCH_ARG's mutable getters).
struct StateFields {
  std::vector<std::pair<const char*, at::Tensor*>> tensors;
  std::vector<std::pair<const char*, std::deque<at::Tensor>*>> deques;  // LBFGS's histories
  int64_t* step = nullptr;  // the step count, for the optimizers that keep one per parameter
};

/// Empty for an optimizer type acc does not know (its state stays opaque, in libtorch's archive).
/// The step count is libtorch's integer, brought up to date from a fused step's device count.
StateFields fields_of(torch::optim::OptimizerParamState& state);

/// A fresh, empty state of the type `optimizer` keeps, for the element-wise optimizers acc knows
/// (SGD, Adam, AdamW, Adagrad, RMSprop); null for any other.
std::unique_ptr<torch::optim::OptimizerParamState> new_param_state(const torch::optim::Optimizer& optimizer);

}  // namespace acc::detail
