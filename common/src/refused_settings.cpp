#include <acc_common/refused_settings.h>

#include <acc/environment.h>
#include <acc_common/fsdp_vocabulary.h>

#include <algorithm>
#include <cctype>

namespace acc::common {
namespace {

std::string upper(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::toupper(c); });
  return text;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

bool is_sharding_strategy_name(const std::string& value) {
  const auto& names = sharding_strategies();
  return std::find(names.begin(), names.end(), value) != names.end();
}

}  // namespace

std::optional<bool> parse_boolean(const std::string& text) {
  const std::string v = lower(text);
  if (v == "y" || v == "yes" || v == "t" || v == "true" || v == "on" || v == "1") return true;
  if (v == "n" || v == "no" || v == "f" || v == "false" || v == "off" || v == "0") return false;
  return std::nullopt;
}

std::vector<std::string> split_class_names(const std::string& text) {
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

std::optional<Refusal> refuse_mixed_precision(const std::string& value) {
  if (lower(value) != "fp8") return std::nullopt;
  return Refusal{"mixed_precision",
                 "fp8 training is not part of acc (Accelerate runs it through Transformer Engine, MS-AMP or "
                 "torchao, which acc does not have)",
                 "use 'bf16' or 'fp16'"};
}

std::optional<Refusal> refuse_auto_wrap(const std::string& policy, const std::vector<std::string>& class_names) {
  if (upper(policy) != "TRANSFORMER_BASED_WRAP" || !class_names.empty()) return std::nullopt;
  return Refusal{"fsdp_auto_wrap_policy",
                 "TRANSFORMER_BASED_WRAP needs the module types to wrap, and C++ models do not declare them "
                 "(Python takes them from the model's _no_split_modules)",
                 "name your layers' module types in fsdp_transformer_layer_cls_to_wrap (e.g. Block, which also "
                 "matches BlockImpl), or choose fsdp_auto_wrap_policy SIZE_BASED_WRAP or NO_WRAP"};
}

std::optional<Refusal> refuse_cpu_ram_efficient_loading(bool cpu_ram_efficient_loading, bool sync_module_states) {
  if (!cpu_ram_efficient_loading || sync_module_states) return std::nullopt;
  return Refusal{"fsdp_cpu_ram_efficient_loading",
                 "cpu_ram_efficient_loading needs sync_module_states (the processes that build the model empty "
                 "get the main process's weights through it)",
                 "set fsdp_sync_module_states true, or fsdp_cpu_ram_efficient_loading false"};
}

std::optional<Refusal> refuse_reshard_after_forward(const std::string& value) {
  if (parse_boolean(value)) return std::nullopt;
  const std::string name = upper(value);
  if (is_sharding_strategy_name(name)) {
    return Refusal{"fsdp_reshard_after_forward",
                   "'" + value + "' is a sharding strategy (FSDP1's spelling of this setting), and acc reads "
                   "fsdp_reshard_after_forward as a boolean (FSDP2's): whether a FULL_SHARD unit is released "
                   "after its forward",
                   "give the strategy as fsdp_sharding_strategy " + name +
                       ", and set fsdp_reshard_after_forward true (or remove it)"};
  }
  return Refusal{"fsdp_reshard_after_forward", "'" + value + "' is not a boolean", "use true or false"};
}

std::vector<Refusal> refused_launch_variables(const VariableLookup& variable) {
  std::vector<Refusal> out;
  auto add = [&out](std::optional<Refusal> refusal) {
    if (refusal) out.push_back(std::move(*refusal));
  };
  if (const auto precision = variable(env::kMixedPrecision)) add(refuse_mixed_precision(*precision));
  // FSDP_* mean something only with FSDP on, as the runtime reads them.
  const auto use_fsdp = variable(env::kUseFsdp);
  if (!use_fsdp || parse_boolean(*use_fsdp) != true) return out;
  // A malformed boolean is the runtime's parse error, not a combination: it takes the default here.
  auto flag = [&variable](const char* name, bool fallback) {
    const auto text = variable(name);
    return text ? parse_boolean(*text).value_or(fallback) : fallback;
  };
  add(refuse_cpu_ram_efficient_loading(flag(env::kFsdpCpuRamEfficientLoading, false),
                                       flag(env::kFsdpSyncModuleStates, true)));
  if (const auto policy = variable(env::kFsdpAutoWrapPolicy))
    add(refuse_auto_wrap(*policy, split_class_names(variable(env::kFsdpTransformerClsToWrap).value_or(""))));
  if (const auto reshard = variable(env::kFsdpReshardAfterForward)) add(refuse_reshard_after_forward(*reshard));
  return out;
}

}  // namespace acc::common
