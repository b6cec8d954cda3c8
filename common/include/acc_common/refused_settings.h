#pragma once
// The launch settings acc's runtime refuses when an Accelerator is built, decided here once. The runtime
// throws its ConfigError from these answers; acc-launch and acc-env ask the same questions of the values a
// launch would give the ranks, before any rank starts. Two copies of these rules had drifted: acc-launch
// started every rank with settings each of them then refused (Accelerate's own fsdp.yaml template,
// mixed_precision fp8), and each rank aborted.
//
// Only settings whose every value is well formed are judged here (a value outside its list of choices is
// each wing's own parse error); a Refusal is a combination, or a value of Accelerate's, that acc cannot run.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace acc::common {

// What is refused, why, and the fix, in the words of Accelerate's config file and acc-launch's flags.
// Each wing adds where the setting came from (a config file's line, a flag, an environment variable, an
// argument in code).
struct Refusal {
  std::string key;  // the config key, which is also the flag's name: "fsdp_auto_wrap_policy"
  std::string why;  // "TRANSFORMER_BASED_WRAP needs the module types to wrap, ..."
  std::string fix;  // "set fsdp_transformer_layer_cls_to_wrap to ..."
};

// The booleans of Accelerate's str_to_bool, any case: y/yes/t/true/on/1 and n/no/f/false/off/0; nullopt for
// anything else.
std::optional<bool> parse_boolean(const std::string& text);

// FSDP_TRANSFORMER_CLS_TO_WRAP as the runtime matches module types against it: split at commas, blanks
// removed, empty names dropped (" , " names nothing).
std::vector<std::string> split_class_names(const std::string& text);

// mixed_precision (any case): "fp8" is refused (Accelerate runs it through Transformer Engine, MS-AMP or
// torchao, none of which acc has); no, fp16 and bf16 pass, and so does anything else (not a choice at all).
std::optional<Refusal> refuse_mixed_precision(const std::string& value);

// fsdp_auto_wrap_policy (any case) TRANSFORMER_BASED_WRAP with no class names: Python takes them from the
// model's _no_split_modules; a C++ module declares nothing.
std::optional<Refusal> refuse_auto_wrap(const std::string& policy, const std::vector<std::string>& class_names);

// fsdp_cpu_ram_efficient_loading without fsdp_sync_module_states: the ranks that build the model empty would
// never get weights (accelerate launch refuses the pair too).
std::optional<Refusal> refuse_cpu_ram_efficient_loading(bool cpu_ram_efficient_loading, bool sync_module_states);

// fsdp_reshard_after_forward: acc reads a boolean (FSDP2's spelling). A sharding strategy name (FSDP1's
// spelling, which `accelerate config` writes for fsdp_version 1) or any other text is refused, naming
// fsdp_sharding_strategy for the strategy.
std::optional<Refusal> refuse_reshard_after_forward(const std::string& value);

// Every refusal of the variables a launcher gives the ranks (ACCELERATE_MIXED_PRECISION, and with
// ACCELERATE_USE_FSDP the FSDP_* variables), as a rank whose program sets none of them in code reads them.
// `variable` returns a variable's value, nullopt when unset.
using VariableLookup = std::function<std::optional<std::string>(const std::string&)>;
std::vector<Refusal> refused_launch_variables(const VariableLookup& variable);

}  // namespace acc::common
