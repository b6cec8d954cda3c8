#pragma once
// The optimizer side of SHARD_GRAD_OP: the prepared acc::Optimizer's parameter groups hold this
// rank's shard pieces instead of whole parameters, so Opt::step creates and updates state for
// 1/N of the parameters only; after each step the controller all-gathers the parameters.
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <acc/optimizer.h>

namespace acc::detail {

class ShardedReducer;

/// One parameter of an optimizer as the user built it, and what the optimizer steps for it here.
struct OptimizerSlot {
  at::Tensor full;   // the model parameter
  at::Tensor local;  // in the optimizer's groups: a 1-D piece of `full`, `full` itself, or undefined
  int64_t begin = 0;  // local's elements in `full`, flattened: [begin, end)
  int64_t end = 0;
  ShardedReducer* reducer = nullptr;  // null: not sharded (frozen, or no FSDP engine)
  size_t index = 0;                   // in reducer->parameters()
};
/// Per parameter group, in order: the numbering checkpoints use for optimizer state.
using OptimizerLayout = std::vector<std::vector<OptimizerSlot>>;

/// The layout of an optimizer nothing sharded: every slot's local is its full parameter.
OptimizerLayout unsharded_layout(const torch::optim::Optimizer& optimizer);

struct ShardedOptimizer {
  std::vector<ShardedReducer*> reducers;  // those whose parameters the optimizer steps
  OptimizerLayout layout;
};

/// Replaces every parameter of `optimizer`'s groups that belongs to one of `reducers`' models by
/// its local piece (dropped where this rank holds none of it). State created at construction
/// (Adagrad's accumulators) is sliced to the pieces. Throws ConfigError for an optimizer whose
/// update is not element-wise (LBFGS), one that has already stepped, or a trainable parameter
/// that is in no prepared model.
ShardedOptimizer shard_optimizer(torch::optim::Optimizer& optimizer,
                                 const std::vector<ShardedReducer*>& reducers);

/// Wraps `inner` (accumulation, autocast cache): after every step that ran, the parameters of
/// `reducers` are all-gathered so the next forward sees full, updated parameters.
std::shared_ptr<OptimizerController> make_sharded_optimizer_controller(
    std::shared_ptr<OptimizerController> inner, std::vector<ShardedReducer*> reducers);

}  // namespace acc::detail
