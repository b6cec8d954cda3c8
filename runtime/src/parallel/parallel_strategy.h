#pragma once
// The seam between the Accelerator and the way models are spread over processes: one process
// (local_strategy.h), DDP (ddp/ddp_strategy.h) or FSDP (fsdp/fsdp_strategy.h). core/ builds the
// strategy from a list (core/parallel_strategies.cpp) and never asks which one it has, so a new
// strategy is its own folder plus one line there.
//
// The defaults below are what a strategy that keeps whole models on every rank does: torch's
// clipping, the plain checkpoint layout, no full-parameter gathering.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

#include <acc/fsdp.h>
#include <acc/optimizer.h>
#include <acc/options.h>

namespace acc {
class GradScaler;
}

namespace acc::detail {

class GradientSync;
class ProcessGroup;
class StateDictLayout;

/// What a strategy is built from (Accelerator's constructor).
struct StrategyContext {
  const ResolvedOptions& resolved;
  const DistributedDataParallelKwargs& ddp;
  /// The world's process group; null on one process.
  ProcessGroup* group = nullptr;
  c10::Device device = c10::kCPU;
  /// Processes on this machine (FSDP's hybrid strategies shard within a machine).
  int local_world_size = 1;
  /// fp16 loss scaling; null without it.
  GradScaler* scaler = nullptr;
};

/// What prepare_model knows of a model besides the model.
struct ModelPreparation {
  /// first_meta_tensor(model) on this rank: "" unless it was built under acc::init_empty_weights.
  std::string first_meta;
  c10::Device device = c10::kCPU;
};

class ParallelStrategy {
 public:
  virtual ~ParallelStrategy();

  /// Accelerator::distributed_type, given the process state's.
  virtual DistributedType distributed_type(DistributedType state_type) const { return state_type; }
  /// FSDP's cpu_ram_efficient_loading: only the main process needs the model's weights.
  virtual bool cpu_ram_efficient_loading() const { return false; }

  /// Called once per model, after it reached its device: gives every rank the same weights and
  /// attaches what synchronises its gradients, returned for no_sync() (null: nothing does).
  /// Collective on several processes.
  virtual GradientSync* prepare_model(torch::nn::Module& model, const ModelPreparation& preparation) = 0;
  /// The controller a prepared optimizer steps with. `controller` is acc's step logic, or null for
  /// a plain libtorch optimizer; a strategy that needs acc's logic at step() throws ConfigError.
  virtual std::shared_ptr<OptimizerController> prepare_optimizer(torch::optim::Optimizer& optimizer,
                                                                 std::shared_ptr<OptimizerController> controller);
  /// Accelerator::clip_grad_norm_ and clip_grad_value_, on gradients already unscaled.
  virtual double clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type);
  virtual void clip_grad_value_(const std::vector<at::Tensor>& parameters, double clip_value);
  /// Accelerator::summon_full_params.
  virtual FullParametersGuard full_parameters(const torch::nn::Module& model, bool writeback);
  /// How checkpoints lay out the prepared models and optimizers (see checkpoint/state_dict_layout.h).
  virtual std::unique_ptr<StateDictLayout> make_state_dict_layout();

  /// end_training, collective: the models leave whole and usable without the process group.
  virtual void end_training() {}
  /// After end_training's barrier: drops everything that holds the process group. The strategy then
  /// acts as on one process.
  virtual void release() {}
};

/// Builds the strategy that runs next: `chosen` is the one built so far from the list in
/// core/parallel_strategies.cpp (null for the first); return it when this strategy does not apply.
using StrategyFactory = std::unique_ptr<ParallelStrategy> (*)(const StrategyContext& context,
                                                              std::unique_ptr<ParallelStrategy> chosen);

}  // namespace acc::detail
