#pragma once
// What an Accelerator runs under FSDP SHARD_GRAD_OP / HYBRID_SHARD_ZERO2 on several processes:
// the process groups that share and replicate shards, one ShardedReducer per prepared model, and
// the sharding of prepared optimizers. NO_SHARD does not come here (it is DDP).
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>
#include <vector>

#include <acc/fsdp.h>
#include <acc/optimizer.h>

#include "fsdp/sharded_optimizer.h"

namespace acc::detail {

class GradientSync;
class ProcessGroup;
class ShardedReducer;

class ShardedEngine {
 public:
  /// Collective: every rank constructs it. HYBRID_SHARD_ZERO2 shards within groups of
  /// `local_world_size` consecutive ranks (a machine) and replicates across them.
  /// `offload`: master shards and optimizer state in CPU memory (offload_params on CUDA).
  ShardedEngine(ProcessGroup& world, const ResolvedFsdpPlugin& plugin, int local_world_size, bool offload);
  ~ShardedEngine();

  /// Flattens the model's trainable parameters and attaches the sharded reducer (after the
  /// weights were made equal on every rank).
  GradientSync* prepare_model(torch::nn::Module& model);
  /// Shards the optimizer's parameter groups; the returned controller wraps `inner`.
  std::shared_ptr<OptimizerController> prepare_optimizer(torch::optim::Optimizer& optimizer,
                                                         std::shared_ptr<OptimizerController> inner);
  /// The gradients standing for `params` (model parameters or optimizer pieces): this rank's shard
  /// pieces' .grad. nullopt when a parameter is not sharded here.
  std::optional<std::vector<at::Tensor>> shard_gradients(const std::vector<at::Tensor>& params) const;
  /// The ranks that split each unit between them (norms of shard pieces are summed over it).
  ProcessGroup& shard_group() { return *shard_group_; }
  /// The ranks that hold the same shard on other machines (HYBRID_SHARD_ZERO2); null otherwise.
  ProcessGroup* replica_group() { return replica_group_.get(); }
  /// The reducer of a prepared model; null for a model this engine did not prepare.
  ShardedReducer* reducer_of(const torch::nn::Module& model) const;
  /// The layout of a prepared optimizer; null for one this engine did not shard.
  const OptimizerLayout* layout_of(const torch::optim::Optimizer& optimizer) const;

 private:
  ProcessGroup& world_;
  ResolvedFsdpPlugin plugin_;
  std::unique_ptr<ProcessGroup> own_shard_group_;  // hybrid only; else the world shards
  std::unique_ptr<ProcessGroup> replica_group_;    // hybrid only
  ProcessGroup* shard_group_;
  bool offload_;
  std::vector<std::unique_ptr<ShardedReducer>> reducers_;
  std::vector<const torch::nn::Module*> models_;  // reducers_[i] is models_[i]'s
  std::vector<std::pair<const torch::optim::Optimizer*, OptimizerLayout>> optimizers_;
};

}  // namespace acc::detail
