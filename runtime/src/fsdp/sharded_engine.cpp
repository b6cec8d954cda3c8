#include "fsdp/sharded_engine.h"

#include <functional>
#include <utility>

#include <acc/errors.h>
#include <acc/warnings.h>

#include "comm/process_group.h"
#include "fsdp/full_shard.h"
#include "fsdp/sharded_optimizer.h"
#include "fsdp/sharded_reducer.h"
#include "fsdp/wrap_policy.h"

namespace acc::detail {

namespace {
// Subgroup names must differ between Accelerators of one process; every rank creates its engines
// in the same order, so a process-wide count agrees across ranks.
int next_engine_id() {
  static int id = 0;
  return id++;
}

// Runs `after_first_step` once, after the first optimizer step that ran; delegates everything else.
class AfterFirstStep : public OptimizerController {
 public:
  AfterFirstStep(std::shared_ptr<OptimizerController> inner, std::function<void()> after_first_step)
      : inner_(std::move(inner)), after_first_step_(std::move(after_first_step)) {}
  bool before_step(torch::optim::Optimizer& optimizer) override { return inner_->before_step(optimizer); }
  bool before_fused_step(torch::optim::Optimizer& optimizer, FusedStepScaling& scaling) override {
    return inner_->before_fused_step(optimizer, scaling);
  }
  void after_step(torch::optim::Optimizer& optimizer) override {
    inner_->after_step(optimizer);
    if (after_first_step_) std::exchange(after_first_step_, nullptr)();
  }
  torch::Tensor run_step(torch::optim::Optimizer& optimizer, const std::function<torch::Tensor()>& update) override {
    return inner_->run_step(optimizer, update);
  }
  bool before_zero_grad(torch::optim::Optimizer& optimizer) override { return inner_->before_zero_grad(optimizer); }
  bool step_was_skipped(const torch::optim::Optimizer& optimizer) const override {
    return inner_->step_was_skipped(optimizer);
  }

 private:
  std::shared_ptr<OptimizerController> inner_;
  std::function<void()> after_first_step_;
};
}  // namespace

ShardedEngine::ShardedEngine(ProcessGroup& world, const ResolvedFsdpPlugin& plugin,
                             int local_world_size, bool offload)
    : world_(world), plugin_(plugin), shard_group_(&world), offload_(offload) {
  const int id = next_engine_id();
  const auto strategy = plugin.sharding_strategy;
  if (plugin.activation_checkpointing && !shards_parameters()) {
    warn("acc: note: FSDP activation checkpointing applies to FULL_SHARD/HYBRID_SHARD units; under " +
         to_string(strategy) + " wrap the pieces to recompute in acc::checkpoint(...) (docs/hooks.md)");
  }
  if (strategy != ShardingStrategy::HYBRID_SHARD_ZERO2 && strategy != ShardingStrategy::HYBRID_SHARD) return;
  const int world_size = world.size();
  if (local_world_size < 1 || world_size % local_world_size != 0) {
    throw ConfigError("acc: FSDP " + to_string(strategy) + " shards within each machine, but the " +
                      std::to_string(world_size) + " processes do not split into machines of " +
                      std::to_string(local_world_size) +
                      " (LOCAL_WORLD_SIZE); launch the same number of processes on every machine");
  }
  const int machine = world.rank() / local_world_size;
  const int local = world.rank() % local_world_size;
  std::vector<int> machine_ranks, replica_ranks;
  for (int r = 0; r < local_world_size; ++r) machine_ranks.push_back(machine * local_world_size + r);
  for (int m = 0; m < world_size / local_world_size; ++m) replica_ranks.push_back(m * local_world_size + local);
  const std::string prefix = "fsdp" + std::to_string(id);
  own_shard_group_ = world.subgroup(machine_ranks, prefix + "/machine" + std::to_string(machine));
  replica_group_ = world.subgroup(replica_ranks, prefix + "/replica" + std::to_string(local));
  shard_group_ = own_shard_group_.get();
}

ShardedEngine::~ShardedEngine() {
  full_shard_.clear();  // its hooks point into the reducers
}

bool ShardedEngine::shards_parameters() const {
  return plugin_.sharding_strategy == ShardingStrategy::FULL_SHARD ||
         plugin_.sharding_strategy == ShardingStrategy::HYBRID_SHARD;
}

GradientSync* ShardedEngine::prepare_model(torch::nn::Module& model, const WeightSource& source) {
  std::vector<NamedTensor> params;
  for (const auto& item : model.named_parameters()) {
    if (item.value().requires_grad()) params.push_back({item.key(), item.value()});
  }
  ShardedReducerOptions options;
  options.bucket_cap_mb = plugin_.bucket_cap_mb;
  options.offload = offload_;
  options.fill_from = source.from_rank0 ? &world_ : nullptr;
  options.device = source.device;
  std::vector<UnitModule> units;
  if (shards_parameters()) {
    units = select_units(model, params, plugin_);
    for (const auto& unit : units) {
      options.groups.push_back(unit.params);
      // The root stays whole: the training loop calls it, so its seam rarely runs.
      options.start_released.push_back(source.built_empty && !unit.path.empty());
    }
    options.shard_at_rest = true;
  }
  reducers_.push_back(std::make_unique<ShardedReducer>(std::move(params), *shard_group_,
                                                       replica_group_.get(), world_.size(),
                                                       std::move(options)));
  full_shard_.push_back(shards_parameters() ? std::make_unique<FullShardUnits>(
                                                  model, *reducers_.back(), std::move(units), plugin_)
                                            : nullptr);
  models_.push_back(&model);
  return reducers_.back().get();
}

void ShardedEngine::gather_all() {
  for (auto& reducer : reducers_) {
    for (size_t u = 0; u < reducer->units().size(); ++u) reducer->gather(u);
  }
}

FullParametersGuard ShardedEngine::full_parameters(const torch::nn::Module& model, bool writeback) {
  ShardedReducer* reducer = reducer_of(model);
  if (reducer == nullptr || !reducer->shards_at_rest()) return {};
  std::vector<size_t> gathered;
  for (size_t u = 0; u < reducer->units().size(); ++u) {
    if (reducer->is_gathered(u)) continue;
    reducer->gather(u);
    gathered.push_back(u);
  }
  std::weak_ptr<int> alive = alive_;
  return FullParametersGuard([reducer, gathered, writeback, alive] {
    if (alive.expired()) return;
    if (writeback) reducer->parameters_changed();
    for (size_t u : gathered) reducer->release(u);
  });
}

std::shared_ptr<OptimizerController> ShardedEngine::prepare_optimizer(
    torch::optim::Optimizer& optimizer, std::shared_ptr<OptimizerController> inner) {
  std::vector<ShardedReducer*> reducers;
  for (auto& reducer : reducers_) reducers.push_back(reducer.get());
  auto sharded = shard_optimizer(optimizer, reducers);
  optimizers_.emplace_back(&optimizer, std::move(sharded.layout));
  auto controller = make_sharded_optimizer_controller(std::move(inner), std::move(sharded.reducers));
  if (!shards_parameters()) return controller;
  // By the first step every unit that runs the seam has run it: name those that did not.
  return std::make_shared<AfterFirstStep>(std::move(controller), [this, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired()) return;
    for (auto& units : full_shard_)
      if (units) units->check_seams_once(plugin_.require_unit_seams);
  });
}

ShardedReducer* ShardedEngine::reducer_of(const torch::nn::Module& model) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i] == &model) return reducers_[i].get();
  }
  return nullptr;
}

const OptimizerLayout* ShardedEngine::layout_of(const torch::optim::Optimizer& optimizer) const {
  for (const auto& [prepared, layout] : optimizers_) {
    if (prepared == &optimizer) return &layout;
  }
  return nullptr;
}

std::optional<std::vector<at::Tensor>> ShardedEngine::shard_gradients(
    const std::vector<at::Tensor>& params) const {
  std::vector<at::Tensor> grads;
  for (const auto& param : params) {
    bool found = false;
    for (const auto& reducer : reducers_) {
      auto piece = reducer->local_piece(param, &found);
      if (!found && reducer->is_piece(param)) {
        found = true;
        piece = param;
      }
      if (!found) continue;
      if (piece.defined() && piece.grad().defined()) grads.push_back(piece.grad());
      break;
    }
    if (!found) return std::nullopt;
  }
  return grads;
}

}  // namespace acc::detail
