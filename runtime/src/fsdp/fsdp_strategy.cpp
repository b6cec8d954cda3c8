#include "fsdp/fsdp_strategy.h"

#include <acc/errors.h>
#include <acc/grad_scaler.h>
#include <acc/testing.h>
#include <acc/warnings.h>

#include "checkpoint/state_dict_layout.h"
#include "comm/process_group.h"
#include "fsdp/sharded_engine.h"
#include "fsdp/sharded_grad_clip.h"
#include "fsdp/sharded_state_dict.h"
#include "parallel/meta_tensors.h"
#include "parallel/model_sync.h"

namespace acc::detail {

FsdpStrategy::FsdpStrategy(const StrategyContext& context, std::unique_ptr<ParallelStrategy> replicated)
    : plugin_(context.resolved.fsdp), replicated_(std::move(replicated)), group_(context.group) {
  // Offload copies to and from CUDA only, unless a test forces it (acc/testing.h).
  const bool offload = plugin_.offload_params && (context.device.is_cuda() || testing::forced_on_cpu().fsdp_offload);
  if (plugin_.offload_params && !offload) {
    warn("acc: note: FSDP offload_params changes nothing on a CPU run (the shards are already in CPU memory)");
  }
  if (group_ == nullptr || plugin_.sharding_strategy == ShardingStrategy::NO_SHARD) return;
  if (context.scaler != nullptr) {
    ProcessGroup* group = group_;
    context.scaler->set_found_inf_reduction([group](at::Tensor& found) {
      group->all_reduce_(found, c10d::ReduceOp::MAX, "fp16 overflow check over the FSDP shards");
    });
  }
  engine_ = std::make_unique<ShardedEngine>(*group_, plugin_, context.local_world_size, offload);
}

FsdpStrategy::~FsdpStrategy() = default;

DistributedType FsdpStrategy::distributed_type(DistributedType state_type) const {
  return state_type == DistributedType::NO ? state_type : DistributedType::FSDP;
}

bool FsdpStrategy::cpu_ram_efficient_loading() const { return plugin_.cpu_ram_efficient_loading; }

GradientSync* FsdpStrategy::prepare_model(torch::nn::Module& model, const ModelPreparation& preparation) {
  if (!engine_) return replicated_->prepare_model(model, preparation);
  const bool from_rank0 = plugin_.sync_module_states;
  const bool built_empty = check_empty_weights(group_, preparation.first_meta, from_rank0);
  check_models_agree(*group_, model);
  // The buffers and frozen parameters come whole from rank 0 here; the engine fills the trainable
  // parameters unit by unit (cpu_ram_efficient_loading).
  if (from_rank0) {
    materialize_meta_tensors(model, preparation.device, /*trainable=*/false);
    broadcast_model_state(*group_, model, /*trainable=*/false);
  }
  return engine_->prepare_model(model, {from_rank0, built_empty, preparation.device});
}

std::shared_ptr<OptimizerController> FsdpStrategy::prepare_optimizer(torch::optim::Optimizer& optimizer,
                                                                     std::shared_ptr<OptimizerController> controller) {
  if (!engine_) return replicated_->prepare_optimizer(optimizer, std::move(controller));
  if (controller == nullptr) {
    throw ConfigError("acc: a plain libtorch optimizer was passed to prepare(), but FSDP "
                      "SHARD_GRAD_OP must all-gather the parameters after each step. Declare it as "
                      "acc::Optimizer<YourOptimizer> (same constructor arguments), e.g. "
                      "acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), 1e-3);");
  }
  return engine_->prepare_optimizer(optimizer, std::move(controller));
}

// Parameters this rank holds shards of are clipped by the norm over every shard; any other (a
// parameter of no prepared model) as the wrapped strategy clips it.
double FsdpStrategy::clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm, double norm_type) {
  if (engine_) {
    if (auto grads = engine_->shard_gradients(parameters)) {
      return clip_sharded_grad_norm_(*grads, engine_->shard_group(), max_norm, norm_type);
    }
  }
  return replicated_->clip_grad_norm_(parameters, max_norm, norm_type);
}

void FsdpStrategy::clip_grad_value_(const std::vector<at::Tensor>& parameters, double clip_value) {
  if (engine_) {
    if (auto grads = engine_->shard_gradients(parameters)) {
      for (auto& g : *grads) g.clamp_(-clip_value, clip_value);
      return;
    }
  }
  replicated_->clip_grad_value_(parameters, clip_value);
}

FullParametersGuard FsdpStrategy::full_parameters(const torch::nn::Module& model, bool writeback) {
  if (!engine_) return {};
  return engine_->full_parameters(model, writeback);
}

// Under FSDP, whatever the number of processes, checkpoints follow fsdp_state_dict_type.
std::unique_ptr<StateDictLayout> FsdpStrategy::make_state_dict_layout() {
  return make_sharded_state_dict_layout(plugin_.state_dict_type, engine_.get());
}

void FsdpStrategy::end_training() {
  // FULL_SHARD: the models leave whole, usable without the process group.
  if (engine_) engine_->gather_all();
  replicated_->end_training();
}

void FsdpStrategy::release() {
  engine_.reset();
  group_ = nullptr;
  replicated_->release();
}

std::unique_ptr<ParallelStrategy> make_fsdp_strategy(const StrategyContext& context,
                                                     std::unique_ptr<ParallelStrategy> chosen) {
  if (!context.resolved.use_fsdp) return chosen;
  check_fsdp_supported(context.resolved.fsdp);
  return std::make_unique<FsdpStrategy>(context, std::move(chosen));
}

}  // namespace acc::detail
