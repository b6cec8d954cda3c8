#include <acc/environment.h>
#include <acc/errors.h>
#include <acc/fsdp.h>
#include <acc/options.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace acc {

namespace {
std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return text;
}

// In enum order, which is also the order of Accelerate's legacy numbers 1..5.
constexpr std::array<ShardingStrategy, 5> kStrategies = {
    ShardingStrategy::FULL_SHARD, ShardingStrategy::SHARD_GRAD_OP, ShardingStrategy::NO_SHARD,
    ShardingStrategy::HYBRID_SHARD, ShardingStrategy::HYBRID_SHARD_ZERO2};
constexpr std::array<StateDictType, 3> kStateDictTypes = {
    StateDictType::FULL_STATE_DICT, StateDictType::LOCAL_STATE_DICT,
    StateDictType::SHARDED_STATE_DICT};
}  // namespace

std::string to_string(ShardingStrategy value) {
  switch (value) {
    case ShardingStrategy::FULL_SHARD: return "FULL_SHARD";
    case ShardingStrategy::SHARD_GRAD_OP: return "SHARD_GRAD_OP";
    case ShardingStrategy::NO_SHARD: return "NO_SHARD";
    case ShardingStrategy::HYBRID_SHARD: return "HYBRID_SHARD";
    case ShardingStrategy::HYBRID_SHARD_ZERO2: return "HYBRID_SHARD_ZERO2";
  }
  return "?";
}

std::string to_string(StateDictType value) {
  switch (value) {
    case StateDictType::FULL_STATE_DICT: return "FULL_STATE_DICT";
    case StateDictType::LOCAL_STATE_DICT: return "LOCAL_STATE_DICT";
    case StateDictType::SHARDED_STATE_DICT: return "SHARDED_STATE_DICT";
  }
  return "?";
}

ShardingStrategy parse_sharding_strategy(const std::string& text, const std::string& source) {
  const auto value = upper(text);
  // Configs written by older Accelerate versions store the strategy as its enum number.
  if (value.size() == 1 && value[0] >= '1' && value[0] <= '5') return kStrategies[value[0] - '1'];
  for (auto strategy : kStrategies) {
    if (value == to_string(strategy)) return strategy;
  }
  throw ConfigError("acc: unknown FSDP sharding strategy '" + text + "' (" + source +
                    "); expected one of FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, "
                    "HYBRID_SHARD_ZERO2 (or Accelerate's numbers 1-5)");
}

StateDictType parse_state_dict_type(const std::string& text, const std::string& source) {
  const auto value = upper(text);
  for (auto type : kStateDictTypes) {
    if (value == to_string(type)) return type;
  }
  throw ConfigError("acc: unknown FSDP state dict type '" + text + "' (" + source +
                    "); expected one of FULL_STATE_DICT, LOCAL_STATE_DICT, SHARDED_STATE_DICT");
}

ResolvedFsdpPlugin resolve_fsdp_plugin(const FullyShardedDataParallelPlugin& plugin,
                                       const EnvLookup& env) {
  ResolvedFsdpPlugin out;
  if (plugin.sharding_strategy()) {
    out.sharding_strategy = *plugin.sharding_strategy();
  } else if (auto v = env(env::kFsdpShardingStrategy)) {
    out.sharding_strategy = parse_sharding_strategy(*v, env::kFsdpShardingStrategy);
  }
  if (plugin.state_dict_type()) {
    out.state_dict_type = *plugin.state_dict_type();
  } else if (auto v = env(env::kFsdpStateDictType)) {
    out.state_dict_type = parse_state_dict_type(*v, env::kFsdpStateDictType);
  }
  if (plugin.offload_params()) {
    out.offload_params = *plugin.offload_params();
  } else if (auto v = env(env::kFsdpOffloadParams)) {
    out.offload_params = parse_env_bool(env::kFsdpOffloadParams, *v);
  }
  if (plugin.sync_module_states()) {
    out.sync_module_states = *plugin.sync_module_states();
  } else if (auto v = env(env::kFsdpSyncModuleStates)) {
    out.sync_module_states = parse_env_bool(env::kFsdpSyncModuleStates, *v);
  }
  if (plugin.bucket_cap_mb() <= 0) {
    throw ConfigError("acc: FullyShardedDataParallelPlugin bucket_cap_mb(" +
                      std::to_string(plugin.bucket_cap_mb()) + ") must be positive");
  }
  out.bucket_cap_mb = plugin.bucket_cap_mb();
  return out;
}

void check_fsdp_supported(const ResolvedFsdpPlugin& plugin) {
  const auto strategy = plugin.sharding_strategy;
  if (strategy == ShardingStrategy::FULL_SHARD || strategy == ShardingStrategy::HYBRID_SHARD) {
    throw ConfigError(
        "acc: FSDP sharding strategy " + to_string(strategy) +
        " (parameters sharded between forward passes) is not in this version of acc yet (FSDP "
        "part 2). Use SHARD_GRAD_OP (gradients and optimizer state sharded)" +
        std::string(strategy == ShardingStrategy::HYBRID_SHARD ? ", HYBRID_SHARD_ZERO2" : "") +
        " or NO_SHARD: set FSDP_SHARDING_STRATEGY / fsdp_sharding_strategy in the config, or "
        "FullyShardedDataParallelPlugin().sharding_strategy(acc::ShardingStrategy::SHARD_GRAD_OP)");
  }
}

}  // namespace acc
