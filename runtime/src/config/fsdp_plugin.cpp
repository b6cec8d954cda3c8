#include <acc/environment.h>
#include <acc/errors.h>
#include <acc/fsdp.h>
#include <acc/options.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>
#include <string>
#include <vector>

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
constexpr std::array<AutoWrapPolicy, 3> kWrapPolicies = {
    AutoWrapPolicy::TRANSFORMER_BASED_WRAP, AutoWrapPolicy::SIZE_BASED_WRAP, AutoWrapPolicy::NO_WRAP};

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out;
  std::string current;
  for (char c : text + ",") {
    if (c == ',') {
      if (!current.empty()) out.push_back(current);
      current.clear();
    } else if (!std::isspace(static_cast<unsigned char>(c))) {
      current += c;
    }
  }
  return out;
}
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

std::string to_string(AutoWrapPolicy value) {
  switch (value) {
    case AutoWrapPolicy::TRANSFORMER_BASED_WRAP: return "TRANSFORMER_BASED_WRAP";
    case AutoWrapPolicy::SIZE_BASED_WRAP: return "SIZE_BASED_WRAP";
    case AutoWrapPolicy::NO_WRAP: return "NO_WRAP";
  }
  return "?";
}

AutoWrapPolicy parse_auto_wrap_policy(const std::string& text, const std::string& source) {
  const auto value = upper(text);
  for (auto policy : kWrapPolicies) {
    if (value == to_string(policy)) return policy;
  }
  throw ConfigError("acc: unknown FSDP auto wrap policy '" + text + "' (" + source +
                    "); expected one of TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP");
}

std::string to_string(BackwardPrefetch value) {
  switch (value) {
    case BackwardPrefetch::BACKWARD_PRE: return "BACKWARD_PRE";
    case BackwardPrefetch::BACKWARD_POST: return "BACKWARD_POST";
    case BackwardPrefetch::NO_PREFETCH: return "NO_PREFETCH";
  }
  return "?";
}

BackwardPrefetch parse_backward_prefetch(const std::string& text, const std::string& source) {
  const auto value = upper(text);
  for (auto prefetch : {BackwardPrefetch::BACKWARD_PRE, BackwardPrefetch::BACKWARD_POST, BackwardPrefetch::NO_PREFETCH}) {
    if (value == to_string(prefetch)) return prefetch;
  }
  throw ConfigError("acc: unknown FSDP backward prefetch '" + text + "' (" + source +
                    "); expected one of BACKWARD_PRE, BACKWARD_POST, NO_PREFETCH");
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
  if (plugin.auto_wrap_policy()) {
    out.auto_wrap_policy = *plugin.auto_wrap_policy();
  } else if (auto v = env(env::kFsdpAutoWrapPolicy)) {
    out.auto_wrap_policy = parse_auto_wrap_policy(*v, env::kFsdpAutoWrapPolicy);
  }
  if (plugin.transformer_cls_names_to_wrap()) {
    out.transformer_cls_names_to_wrap = *plugin.transformer_cls_names_to_wrap();
  } else if (auto v = env(env::kFsdpTransformerClsToWrap)) {
    out.transformer_cls_names_to_wrap = split_names(*v);
  }
  if (plugin.min_num_params()) {
    out.min_num_params = *plugin.min_num_params();
  } else if (auto v = env(env::kFsdpMinNumParams)) {
    try {
      size_t used = 0;
      out.min_num_params = std::stoll(*v, &used);
      if (used != v->size()) throw std::invalid_argument(*v);
    } catch (const std::exception&) {
      throw ConfigError(std::string("acc: ") + env::kFsdpMinNumParams + "='" + *v +
                        "' is not a whole number of parameters (e.g. 100000000)");
    }
  }
  if (out.min_num_params < 0) {
    throw ConfigError("acc: FSDP min_num_params (" + std::to_string(out.min_num_params) + ") must not be negative");
  }
  if (plugin.reshard_after_forward()) {
    out.reshard_after_forward = *plugin.reshard_after_forward();
  } else if (auto v = env(env::kFsdpReshardAfterForward)) {
    out.reshard_after_forward = parse_env_bool(env::kFsdpReshardAfterForward, *v);
  }
  if (plugin.activation_checkpointing()) {
    out.activation_checkpointing = *plugin.activation_checkpointing();
  } else if (auto v = env(env::kFsdpActivationCheckpointing)) {
    out.activation_checkpointing = parse_env_bool(env::kFsdpActivationCheckpointing, *v);
  }
  if (plugin.backward_prefetch()) {
    out.backward_prefetch = *plugin.backward_prefetch();
  } else if (auto v = env(env::kFsdpBackwardPrefetch)) {
    out.backward_prefetch = parse_backward_prefetch(*v, env::kFsdpBackwardPrefetch);
  }
  if (plugin.forward_prefetch()) {
    out.forward_prefetch = *plugin.forward_prefetch();
  } else if (auto v = env(env::kFsdpForwardPrefetch)) {
    out.forward_prefetch = parse_env_bool(env::kFsdpForwardPrefetch, *v);
  }
  if (plugin.bucket_cap_mb() <= 0) {
    throw ConfigError("acc: FullyShardedDataParallelPlugin bucket_cap_mb(" +
                      std::to_string(plugin.bucket_cap_mb()) + ") must be positive");
  }
  out.bucket_cap_mb = plugin.bucket_cap_mb();
  return out;
}

void check_fsdp_supported(const ResolvedFsdpPlugin& plugin) {
  if (plugin.auto_wrap_policy == AutoWrapPolicy::TRANSFORMER_BASED_WRAP &&
      plugin.transformer_cls_names_to_wrap.empty()) {
    throw ConfigError(
        "acc: FSDP auto wrap policy TRANSFORMER_BASED_WRAP needs the module types to wrap, and C++ "
        "models do not declare them: set FSDP_TRANSFORMER_CLS_TO_WRAP=Block (fsdp_transformer_layer_cls_to_wrap "
        "in the config), or FullyShardedDataParallelPlugin().transformer_cls_names_to_wrap({\"Block\"})");
  }
}

}  // namespace acc
