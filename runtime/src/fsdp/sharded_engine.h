#pragma once
// What an Accelerator runs under FSDP (FULL_SHARD, SHARD_GRAD_OP and their hybrids) on several
// processes: the process groups that share and replicate shards, one ShardedReducer per prepared
// model (with its FULL_SHARD units), and the sharding of prepared optimizers. NO_SHARD does not
// come here (it is DDP).
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <optional>
#include <vector>

#include <acc/fsdp.h>
#include <acc/optimizer.h>

#include "fsdp/sharded_optimizer.h"

namespace acc::detail {

class FullShardUnits;
class GradientSync;
class ProcessGroup;
class ShardedReducer;

class ShardedEngine {
 public:
  /// Collective: every rank constructs it. The hybrid strategies shard within groups of
  /// `local_world_size` consecutive ranks (a machine) and replicate across them.
  /// `offload`: master shards and optimizer state in CPU memory (offload_params on CUDA).
  ShardedEngine(ProcessGroup& world, const ResolvedFsdpPlugin& plugin, int local_world_size, bool offload);
  ~ShardedEngine();

  /// Where prepare_model takes the values of the trainable parameters from.
  struct WeightSource {
    /// sync_module_states: rank 0 gives every rank each unit's values as the unit is built.
    bool from_rank0 = false;
    /// Some rank built the model empty (meta parameters): FULL_SHARD's units other than the root
    /// start released, so that no rank but 0 ever holds the whole model.
    bool built_empty = false;
    /// Where units of meta parameters are allocated: the model's device.
    c10::Device device = c10::kCPU;
  };
  /// Flattens the model's trainable parameters and attaches the sharded reducer (buffers and frozen
  /// parameters must be equal on every rank already); FULL_SHARD also hooks the units' forwards.
  GradientSync* prepare_model(torch::nn::Module& model, const WeightSource& source);
  /// Gathers every released unit of a prepared model until the guard ends (then writes changes
  /// back to the shards when `writeback`, and releases them again). Collective. A guard that
  /// outlives the engine does nothing at its end.
  FullParametersGuard full_parameters(const torch::nn::Module& model, bool writeback);
  /// Gathers every released unit of every model for good (end_training). Collective.
  void gather_all();
  /// Whether parameters are released between uses (FULL_SHARD, HYBRID_SHARD).
  bool shards_parameters() const;
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
  std::vector<std::unique_ptr<FullShardUnits>> full_shard_;  // per model; null unless FULL_SHARD
  // Expires with the engine: a FullParametersGuard that outlives it (end_training) does nothing.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  std::vector<const torch::nn::Module*> models_;  // reducers_[i] is models_[i]'s
  std::vector<std::pair<const torch::optim::Optimizer*, OptimizerLayout>> optimizers_;
};

}  // namespace acc::detail
