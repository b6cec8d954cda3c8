#pragma once
// The optimizer side of SHARD_GRAD_OP: the prepared acc::Optimizer's parameter groups hold this
// rank's shard pieces instead of whole parameters, so Opt::step creates and updates state for
// 1/N of the parameters only; after each step the controller all-gathers the parameters.
#include <torch/optim/optimizer.h>

#include <memory>
#include <vector>

#include <acc/optimizer.h>

namespace acc::detail {

class ShardedReducer;

/// Replaces every parameter of `optimizer`'s groups that belongs to one of `reducers`' models by
/// its local piece (dropped where this rank holds none of it). Returns the reducers involved.
/// Throws ConfigError for an optimizer whose update is not element-wise (LBFGS), one that has
/// already stepped, or a trainable parameter that is in no prepared model.
std::vector<ShardedReducer*> shard_optimizer(torch::optim::Optimizer& optimizer,
                                             const std::vector<ShardedReducer*>& reducers);

/// Wraps `inner` (accumulation, autocast cache): after every step that ran, the parameters of
/// `reducers` are all-gathered so the next forward sees full, updated parameters.
std::shared_ptr<OptimizerController> make_sharded_optimizer_controller(
    std::shared_ptr<OptimizerController> inner, std::vector<ShardedReducer*> reducers);

}  // namespace acc::detail
