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
constexpr std::array<BackwardPrefetch, 3> kPrefetches = {
    BackwardPrefetch::BACKWARD_PRE, BackwardPrefetch::BACKWARD_POST, BackwardPrefetch::NO_PREFETCH};

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
  for (auto prefetch : kPrefetches) {
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

namespace {
// One field, argument > environment > default: `parse(text, variable)` reads the variable's text.
template <typename T, typename Parse>
void resolve(T& out, const std::optional<T>& argument, const EnvLookup& env, const char* variable, Parse parse) {
  if (argument) {
    out = *argument;
  } else if (auto text = env(variable)) {
    out = parse(*text, variable);
  }
}

bool parse_bool(const std::string& text, const std::string& variable) { return parse_env_bool(variable, text); }

std::vector<std::string> parse_names(const std::string& text, const std::string&) { return split_names(text); }

int64_t parse_count(const std::string& text, const std::string& variable) {
  try {
    size_t used = 0;
    const int64_t value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw ConfigError("acc: " + variable + "='" + text + "' is not a whole number of parameters (e.g. 100000000)");
}
}  // namespace

ResolvedFsdpPlugin resolve_fsdp_plugin(const FullyShardedDataParallelPlugin& plugin,
                                       const EnvLookup& env) {
  ResolvedFsdpPlugin out;
  resolve(out.sharding_strategy, plugin.sharding_strategy(), env, env::kFsdpShardingStrategy, parse_sharding_strategy);
  resolve(out.state_dict_type, plugin.state_dict_type(), env, env::kFsdpStateDictType, parse_state_dict_type);
  resolve(out.offload_params, plugin.offload_params(), env, env::kFsdpOffloadParams, parse_bool);
  resolve(out.sync_module_states, plugin.sync_module_states(), env, env::kFsdpSyncModuleStates, parse_bool);
  resolve(out.cpu_ram_efficient_loading, plugin.cpu_ram_efficient_loading(), env, env::kFsdpCpuRamEfficientLoading,
          parse_bool);
  if (out.cpu_ram_efficient_loading && !out.sync_module_states) {
    // accelerate launch refuses this pair too: the empty processes would never get weights.
    throw ConfigError("acc: FSDP cpu_ram_efficient_loading needs sync_module_states (the processes that build "
                      "the model empty get the main process's weights through it): set "
                      "FSDP_SYNC_MODULE_STATES=true, or FSDP_CPU_RAM_EFFICIENT_LOADING=false");
  }
  resolve(out.auto_wrap_policy, plugin.auto_wrap_policy(), env, env::kFsdpAutoWrapPolicy, parse_auto_wrap_policy);
  resolve(out.transformer_cls_names_to_wrap, plugin.transformer_cls_names_to_wrap(), env,
          env::kFsdpTransformerClsToWrap, parse_names);
  resolve(out.min_num_params, plugin.min_num_params(), env, env::kFsdpMinNumParams, parse_count);
  if (out.min_num_params < 0) {
    throw ConfigError("acc: FSDP min_num_params (" + std::to_string(out.min_num_params) + ") must not be negative");
  }
  resolve(out.reshard_after_forward, plugin.reshard_after_forward(), env, env::kFsdpReshardAfterForward, parse_bool);
  resolve(out.activation_checkpointing, plugin.activation_checkpointing(), env, env::kFsdpActivationCheckpointing,
          parse_bool);
  resolve(out.backward_prefetch, plugin.backward_prefetch(), env, env::kFsdpBackwardPrefetch, parse_backward_prefetch);
  resolve(out.forward_prefetch, plugin.forward_prefetch(), env, env::kFsdpForwardPrefetch, parse_bool);
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
