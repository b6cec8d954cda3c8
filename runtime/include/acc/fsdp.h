#pragma once
// FSDP configuration (Accelerate's FullyShardedDataParallelPlugin): given in code through
// AcceleratorOptions().fsdp_plugin(...), or by the launcher through ACCELERATE_USE_FSDP and the
// FSDP_* variables. Each field: argument > environment > Accelerate's default. See docs/fsdp.md.
#include <torch/arg.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <acc/detail/bucket_size.h>
#include <acc/launch_info.h>

namespace torch::nn {
class Module;
}

namespace acc {

/// torch's ShardingStrategy; the numbers of older Accelerate configs are 1..5 in this order.
enum class ShardingStrategy { FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 };
/// torch's StateDictType (how checkpoints of a sharded model are laid out).
enum class StateDictType { FULL_STATE_DICT, LOCAL_STATE_DICT, SHARDED_STATE_DICT };

/// When FULL_SHARD gathers the next unit of backward ahead of its use (torch's BackwardPrefetch):
/// when the current unit's backward starts (BACKWARD_PRE, torch's default), once its gradients are
/// done (BACKWARD_POST), or not at all.
enum class BackwardPrefetch { BACKWARD_PRE, BACKWARD_POST, NO_PREFETCH };

/// Which modules become FULL_SHARD units (gathered and released as one); Accelerate's names.
enum class AutoWrapPolicy { TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP };

std::string to_string(ShardingStrategy value);
std::string to_string(StateDictType value);
std::string to_string(AutoWrapPolicy value);
std::string to_string(BackwardPrefetch value);
/// Parses a strategy name (case-insensitive) or Accelerate's legacy number 1..5; `source` names
/// where the text came from (an environment variable, an argument).
ShardingStrategy parse_sharding_strategy(const std::string& text, const std::string& source);
StateDictType parse_state_dict_type(const std::string& text, const std::string& source);
AutoWrapPolicy parse_auto_wrap_policy(const std::string& text, const std::string& source);
BackwardPrefetch parse_backward_prefetch(const std::string& text, const std::string& source);

struct FullyShardedDataParallelPlugin {
  /// env FSDP_SHARDING_STRATEGY; default FULL_SHARD (Accelerate's).
  TORCH_ARG(std::optional<ShardingStrategy>, sharding_strategy);
  /// FULL_SHARD/HYBRID_SHARD units (env FSDP_AUTO_WRAP_POLICY; default NO_WRAP: the model is one
  /// unit). Modules marked with acc::fully_shard are units under every policy.
  TORCH_ARG(std::optional<AutoWrapPolicy>, auto_wrap_policy);
  /// TRANSFORMER_BASED_WRAP: the module types that are units, matched against Module::name()
  /// ("Block" also matches BlockImpl; env FSDP_TRANSFORMER_CLS_TO_WRAP, comma-separated).
  TORCH_ARG(std::optional<std::vector<std::string>>, transformer_cls_names_to_wrap);
  /// SIZE_BASED_WRAP: a module is a unit when it holds at least this many parameters that no unit
  /// inside it holds (env FSDP_MIN_NUM_PARAMS; default 100000000, torch's).
  TORCH_ARG(std::optional<int64_t>, min_num_params);
  /// FULL_SHARD: release a unit's parameters after its forward (true, torch's) or keep them until
  /// its backward (env FSDP_RESHARD_AFTER_FORWARD).
  TORCH_ARG(std::optional<bool>, reshard_after_forward);
  /// FULL_SHARD units a Sequential calls run under acc::checkpoint (activations recomputed in
  /// backward; env FSDP_ACTIVATION_CHECKPOINTING; default false). Units your own code calls:
  /// wrap the call in acc::checkpoint.
  TORCH_ARG(std::optional<bool>, activation_checkpointing);
  /// FULL_SHARD: gather the next unit of backward while the current one computes (env
  /// FSDP_BACKWARD_PREFETCH; default BACKWARD_PRE). At most one unit more is whole at a time.
  TORCH_ARG(std::optional<BackwardPrefetch>, backward_prefetch);
  /// FULL_SHARD: gather the next unit of forward (in the previous step's order) while the current
  /// one computes (env FSDP_FORWARD_PREFETCH; default false).
  TORCH_ARG(std::optional<bool>, forward_prefetch);
  /// env FSDP_STATE_DICT_TYPE; default FULL_STATE_DICT.
  TORCH_ARG(std::optional<StateDictType>, state_dict_type);
  /// Optimizer state and master shards on CPU (env FSDP_OFFLOAD_PARAMS; default false). On CPU
  /// runs there is nothing to move.
  TORCH_ARG(std::optional<bool>, offload_params);
  /// Broadcast rank 0's parameters and buffers at prepare (env FSDP_SYNC_MODULE_STATES; default
  /// true). False: every rank must have built identical weights itself.
  TORCH_ARG(std::optional<bool>, sync_module_states);
  /// Only the main process loads the weights (env FSDP_CPU_RAM_EFFICIENT_LOADING; default false;
  /// acc-launch and accelerate launch set it true): Accelerator::cpu_ram_efficient_loading() tells
  /// the others to build the model inside acc::init_empty_weights, and prepare() fills it from the
  /// main process one unit at a time, so no other process ever holds the whole model. Needs
  /// sync_module_states.
  TORCH_ARG(std::optional<bool>, cpu_ram_efficient_loading);
  /// Parameters are flattened into units of about this many MiB (per dtype and device); each
  /// unit's gradient is reduce-scattered as soon as backward has produced all of it.
  TORCH_ARG(double, bucket_cap_mb) = detail::kDefaultBucketCapMb;
  /// FULL_SHARD/HYBRID_SHARD: a unit whose forward has not run the seam by the first optimizer step
  /// stays whole for good; false (the default) names it in a warning, true throws ConfigError from
  /// that step (for CI runs that must not lose the memory saving silently).
  TORCH_ARG(bool, require_unit_seams) = false;
};

/// The plugin after applying the environment and defaults.
struct ResolvedFsdpPlugin {
  ShardingStrategy sharding_strategy = ShardingStrategy::FULL_SHARD;
  AutoWrapPolicy auto_wrap_policy = AutoWrapPolicy::NO_WRAP;
  std::vector<std::string> transformer_cls_names_to_wrap;
  int64_t min_num_params = 100000000;
  bool reshard_after_forward = true;
  bool activation_checkpointing = false;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::BACKWARD_PRE;
  bool forward_prefetch = false;
  StateDictType state_dict_type = StateDictType::FULL_STATE_DICT;
  bool offload_params = false;
  bool sync_module_states = true;
  bool cpu_ram_efficient_loading = false;
  double bucket_cap_mb = detail::kDefaultBucketCapMb;
  bool require_unit_seams = false;
};

/// Applies argument > environment (FSDP_*) > default; throws ConfigError naming the bad variable.
ResolvedFsdpPlugin resolve_fsdp_plugin(const FullyShardedDataParallelPlugin& plugin,
                                       const EnvLookup& env);

/// Throws ConfigError for a configuration that cannot run (TRANSFORMER_BASED_WRAP without class
/// names), naming the fix.
void check_fsdp_supported(const ResolvedFsdpPlugin& plugin);

/// Marks `module` as a FULL_SHARD unit before prepare (Python FSDP2's fully_shard(block), once per
/// block); its forward must run the seam (<acc/hooks.h>) unless a Sequential calls it.
void fully_shard(torch::nn::Module& module);
/// Whether fully_shard(module) was called.
bool is_marked_fully_shard(const torch::nn::Module& module);

/// RAII from Accelerator::summon_full_params: a FULL_SHARD model's parameters are whole while it
/// lives (torch's FSDP.summon_full_params); at its end, what was changed is written back to the
/// shards and the units are released again. Collective: every rank makes and drops it together.
class FullParametersGuard {
 public:
  FullParametersGuard() = default;
  explicit FullParametersGuard(std::function<void()> restore) : restore_(std::move(restore)) {}
  FullParametersGuard(FullParametersGuard&& other) noexcept : restore_(std::move(other.restore_)) {
    other.restore_ = nullptr;
  }
  FullParametersGuard& operator=(FullParametersGuard&&) = delete;
  FullParametersGuard(const FullParametersGuard&) = delete;
  ~FullParametersGuard() {
    if (restore_) restore_();
  }

 private:
  std::function<void()> restore_;
};

}  // namespace acc
