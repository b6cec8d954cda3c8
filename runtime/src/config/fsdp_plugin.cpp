#include <acc/environment.h>
#include <acc/errors.h>
#include <acc/fsdp.h>
#include <acc/options.h>
#include <acc_common/fsdp_vocabulary.h>
#include <acc_common/refused_settings.h>

#include <algorithm>
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

// Each enum's names, which to_string writes and parse_* reads: the shared vocabulary's list
// (acc_common/fsdp_vocabulary.h), which is also what acc-launch exports and lists the values in the
// enum's order (a value's name is at its index), and what parse errors call the enum.
template <typename Enum>
struct EnumNames {
  const std::vector<std::string>& (*names)();
  const char* what;
  const char* also_accepted;  // after the list of names in parse errors
};

constexpr EnumNames<ShardingStrategy> kShardingStrategyNames{common::sharding_strategies, "sharding strategy",
                                                             " (or Accelerate's numbers 1-5)"};
constexpr EnumNames<StateDictType> kStateDictTypeNames{common::state_dict_types, "state dict type", ""};
constexpr EnumNames<AutoWrapPolicy> kAutoWrapPolicyNames{common::auto_wrap_policies, "auto wrap policy", ""};
constexpr EnumNames<BackwardPrefetch> kBackwardPrefetchNames{common::backward_prefetches, "backward prefetch", ""};

template <typename Enum>
std::string name_of(Enum value, const EnumNames<Enum>& table) {
  const auto& names = table.names();
  const auto index = static_cast<size_t>(value);
  return index < names.size() ? names[index] : "?";
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// `text` (any case) as one of the table's names; throws ConfigError naming the enum, the source and the
// choices.
template <typename Enum>
Enum parse_name(const std::string& text, const EnumNames<Enum>& table, const std::string& source) {
  const auto& names = table.names();
  const auto value = upper(text);
  for (size_t i = 0; i < names.size(); ++i) {
    if (value == names[i]) return static_cast<Enum>(i);
  }
  throw ConfigError("acc: unknown FSDP " + std::string(table.what) + " '" + text + "' (" + source +
                    "); expected one of " + joined(names) + table.also_accepted);
}
}  // namespace

std::string to_string(ShardingStrategy value) { return name_of(value, kShardingStrategyNames); }

std::string to_string(StateDictType value) { return name_of(value, kStateDictTypeNames); }

std::string to_string(AutoWrapPolicy value) { return name_of(value, kAutoWrapPolicyNames); }

std::string to_string(BackwardPrefetch value) { return name_of(value, kBackwardPrefetchNames); }

ShardingStrategy parse_sharding_strategy(const std::string& text, const std::string& source) {
  const std::string* named = common::sharding_strategy_from_number(upper(text));
  return parse_name(named ? *named : text, kShardingStrategyNames, source);
}

StateDictType parse_state_dict_type(const std::string& text, const std::string& source) {
  return parse_name(text, kStateDictTypeNames, source);
}

AutoWrapPolicy parse_auto_wrap_policy(const std::string& text, const std::string& source) {
  return parse_name(text, kAutoWrapPolicyNames, source);
}

BackwardPrefetch parse_backward_prefetch(const std::string& text, const std::string& source) {
  return parse_name(text, kBackwardPrefetchNames, source);
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

// acc-launch and acc-env split the names the same way when they judge a launch (acc_common/refused_settings.h).
std::vector<std::string> parse_names(const std::string& text, const std::string&) {
  return common::split_class_names(text);
}

// A boolean (FSDP2's spelling). FSDP1's strategy names, which `accelerate config` writes here for fsdp_version
// 1, are refused with where the strategy goes; acc-launch refuses them before starting the ranks.
bool parse_reshard_after_forward(const std::string& text, const std::string& variable) {
  if (const auto refusal = common::refuse_reshard_after_forward(text)) {
    throw ConfigError("acc: " + variable + ": " + refusal->why + "; " + refusal->fix);
  }
  return parse_bool(text, variable);
}

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
  // accelerate launch refuses this pair too: the empty processes would never get weights.
  if (const auto refusal = common::refuse_cpu_ram_efficient_loading(out.cpu_ram_efficient_loading,
                                                                     out.sync_module_states)) {
    throw ConfigError("acc: FSDP " + refusal->why + ": set FSDP_SYNC_MODULE_STATES=true, or "
                      "FSDP_CPU_RAM_EFFICIENT_LOADING=false (" + refusal->fix + " in the config)");
  }
  resolve(out.auto_wrap_policy, plugin.auto_wrap_policy(), env, env::kFsdpAutoWrapPolicy, parse_auto_wrap_policy);
  resolve(out.transformer_cls_names_to_wrap, plugin.transformer_cls_names_to_wrap(), env,
          env::kFsdpTransformerClsToWrap, parse_names);
  resolve(out.min_num_params, plugin.min_num_params(), env, env::kFsdpMinNumParams, parse_count);
  if (out.min_num_params < 0) {
    throw ConfigError("acc: FSDP min_num_params (" + std::to_string(out.min_num_params) + ") must not be negative");
  }
  resolve(out.reshard_after_forward, plugin.reshard_after_forward(), env, env::kFsdpReshardAfterForward,
          parse_reshard_after_forward);
  resolve(out.activation_checkpointing, plugin.activation_checkpointing(), env, env::kFsdpActivationCheckpointing,
          parse_bool);
  resolve(out.backward_prefetch, plugin.backward_prefetch(), env, env::kFsdpBackwardPrefetch, parse_backward_prefetch);
  resolve(out.forward_prefetch, plugin.forward_prefetch(), env, env::kFsdpForwardPrefetch, parse_bool);
  if (plugin.bucket_cap_mb() <= 0) {
    throw ConfigError("acc: FullyShardedDataParallelPlugin bucket_cap_mb(" +
                      std::to_string(plugin.bucket_cap_mb()) + ") must be positive");
  }
  out.bucket_cap_mb = plugin.bucket_cap_mb();
  out.require_unit_seams = plugin.require_unit_seams();
  return out;
}

// The rule is acc_common/refused_settings.h's, which acc-launch applies before starting the ranks.
void check_fsdp_supported(const ResolvedFsdpPlugin& plugin) {
  if (const auto refusal = common::refuse_auto_wrap(to_string(plugin.auto_wrap_policy),
                                                    plugin.transformer_cls_names_to_wrap)) {
    throw ConfigError(
        "acc: FSDP auto wrap policy " + refusal->why + ": set FSDP_TRANSFORMER_CLS_TO_WRAP=Block "
        "(fsdp_transformer_layer_cls_to_wrap in the config), or "
        "FullyShardedDataParallelPlugin().transformer_cls_names_to_wrap({\"Block\"}); or choose another "
        "auto wrap policy (SIZE_BASED_WRAP, NO_WRAP)");
  }
}

}  // namespace acc
