#pragma once
// FSDP configuration (Accelerate's FullyShardedDataParallelPlugin): given in code through
// AcceleratorOptions().fsdp_plugin(...), or by the launcher through ACCELERATE_USE_FSDP and the
// FSDP_* variables. Each field: argument > environment > Accelerate's default. See docs/fsdp.md.
#include <torch/arg.h>

#include <optional>
#include <string>

#include <acc/detail/bucket_size.h>
#include <acc/launch.h>

namespace acc {

/// torch's ShardingStrategy; the numbers of older Accelerate configs are 1..5 in this order.
enum class ShardingStrategy { FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 };
/// torch's StateDictType (how checkpoints of a sharded model are laid out).
enum class StateDictType { FULL_STATE_DICT, LOCAL_STATE_DICT, SHARDED_STATE_DICT };

std::string to_string(ShardingStrategy value);
std::string to_string(StateDictType value);
/// Parses a strategy name (case-insensitive) or Accelerate's legacy number 1..5; `source` names
/// where the text came from (an environment variable, an argument).
ShardingStrategy parse_sharding_strategy(const std::string& text, const std::string& source);
StateDictType parse_state_dict_type(const std::string& text, const std::string& source);

struct FullyShardedDataParallelPlugin {
  /// env FSDP_SHARDING_STRATEGY; default FULL_SHARD (Accelerate's). This version runs NO_SHARD
  /// (DDP), SHARD_GRAD_OP and HYBRID_SHARD_ZERO2.
  TORCH_ARG(std::optional<ShardingStrategy>, sharding_strategy);
  /// env FSDP_STATE_DICT_TYPE; default FULL_STATE_DICT.
  TORCH_ARG(std::optional<StateDictType>, state_dict_type);
  /// Optimizer state and master shards on CPU (env FSDP_OFFLOAD_PARAMS; default false). On CPU
  /// runs there is nothing to move.
  TORCH_ARG(std::optional<bool>, offload_params);
  /// Broadcast rank 0's parameters and buffers at prepare (env FSDP_SYNC_MODULE_STATES; default
  /// true). False: every rank must have built identical weights itself.
  TORCH_ARG(std::optional<bool>, sync_module_states);
  /// Parameters are flattened into units of about this many MiB (per dtype and device); each
  /// unit's gradient is reduce-scattered as soon as backward has produced all of it.
  TORCH_ARG(double, bucket_cap_mb) = detail::kDefaultBucketCapMb;
};

/// The plugin after applying the environment and defaults.
struct ResolvedFsdpPlugin {
  ShardingStrategy sharding_strategy = ShardingStrategy::FULL_SHARD;
  StateDictType state_dict_type = StateDictType::FULL_STATE_DICT;
  bool offload_params = false;
  bool sync_module_states = true;
  double bucket_cap_mb = detail::kDefaultBucketCapMb;
};

/// Applies argument > environment (FSDP_*) > default; throws ConfigError naming the bad variable.
ResolvedFsdpPlugin resolve_fsdp_plugin(const FullyShardedDataParallelPlugin& plugin,
                                       const EnvLookup& env);

/// Throws ConfigError for what this version cannot run (FULL_SHARD, HYBRID_SHARD), naming the
/// strategies that work.
void check_fsdp_supported(const ResolvedFsdpPlugin& plugin);

}  // namespace acc
