#pragma once
// libtorch optimizers as PyTorch's `optimizer.state_dict()`, the content of Accelerate's
// optimizer.bin: {"state": {index: {"step": float tensor, "exp_avg": ..., ...}},
// "param_groups": [{"lr": ..., "betas": (b1, b2), ..., "params": [indices]}]}, parameters numbered
// across the param groups in order, as PyTorch numbers them.
#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>

#include <string>

namespace acc::detail {

/// PyTorch's state_dict of `optimizer` (SGD, Adam, AdamW, Adagrad, RMSprop); CheckpointError for
/// any other type, which has no PyTorch counterpart acc knows.
c10::IValue python_optimizer_state(torch::optim::Optimizer& optimizer);

/// Loads a PyTorch optimizer state_dict read from `path` into `optimizer`: every param group's
/// options and every parameter's state (onto its parameter's device). CheckpointError naming the
/// file when the groups, the parameters or the optimizer type do not match, or an option has no
/// libtorch counterpart (maximize=True).
void load_python_optimizer_state(torch::optim::Optimizer& optimizer, const c10::IValue& state_dict,
                                 const std::string& path);

}  // namespace acc::detail
