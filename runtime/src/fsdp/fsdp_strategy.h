#pragma once
// FSDP. It shards (FULL_SHARD, SHARD_GRAD_OP and their hybrids) only on several processes, through
// a ShardedEngine (fsdp/sharded_engine.h). Under NO_SHARD or on one process it leaves models,
// optimizers and clipping to the strategy it wraps (DDP or one process) and keeps what FSDP
// decides regardless: the checkpoint layout (state_dict_type), the distributed type and
// cpu_ram_efficient_loading.
#include <memory>

#include "parallel/parallel_strategy.h"

namespace acc::detail {

class ShardedEngine;

class FsdpStrategy final : public ParallelStrategy {
 public:
  /// `replicated`: the strategy that would run without FSDP.
  FsdpStrategy(const StrategyContext& context, std::unique_ptr<ParallelStrategy> replicated);
  ~FsdpStrategy() override;

  DistributedType distributed_type(DistributedType state_type) const override;
  bool cpu_ram_efficient_loading() const override;
  GradientSync* prepare_model(torch::nn::Module& model, const ModelPreparation& preparation) override;
  std::shared_ptr<OptimizerController> prepare_optimizer(torch::optim::Optimizer& optimizer,
                                                         std::shared_ptr<OptimizerController> controller) override;
  double clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type) override;
  void clip_grad_value_(const std::vector<at::Tensor>& parameters, double clip_value) override;
  FullParametersGuard full_parameters(const torch::nn::Module& model, bool writeback) override;
  std::unique_ptr<StateDictLayout> make_state_dict_layout() override;
  void end_training() override;
  void release() override;

 private:
  ResolvedFsdpPlugin plugin_;
  std::unique_ptr<ParallelStrategy> replicated_;
  ProcessGroup* group_;
  std::unique_ptr<ShardedEngine> engine_;  // null unless sharding on several processes
};

/// Wraps `chosen` when FSDP is configured (Accelerate's use_fsdp); ConfigError when this build
/// cannot run the configured plugin.
std::unique_ptr<ParallelStrategy> make_fsdp_strategy(const StrategyContext& context,
                                                     std::unique_ptr<ParallelStrategy> chosen);

}  // namespace acc::detail
