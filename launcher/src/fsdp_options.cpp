#include "fsdp_options.h"

#include <algorithm>
#include <cctype>

#include "launch_settings.h"

namespace acc::launcher {

std::string normalize_fsdp_value(const FsdpOption& option, const std::string& raw, const std::string& what) {
  switch (option.kind) {
    case FsdpValueKind::kBool:
      return parse_bool(raw, what) ? "true" : "false";
    case FsdpValueKind::kInt:
      return std::to_string(parse_int(raw, what, 0));
    case FsdpValueKind::kChoice: {
      std::string value = raw;
      std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::toupper(c); });
      if (option.key == "fsdp_sharding_strategy")
        if (const std::string* named = common::sharding_strategy_from_number(value)) value = *named;
      return parse_choice(value, option.choices, what);
    }
    case FsdpValueKind::kText:
      break;
  }
  // reshard_after_forward is a boolean for FSDP2 and a strategy name for FSDP1: keep booleans in
  // Accelerate's lower-case spelling, pass names through.
  std::string lowered = raw;
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
  if (option.key == "fsdp_reshard_after_forward" && (lowered == "true" || lowered == "false")) return lowered;
  return raw;
}

std::optional<std::string> ignored_fsdp_setting(const std::string& key, const std::string& value) {
  // What runtime/src/fsdp does (docs/fsdp.md, "Design"): parameters are re-pointed at slices of flat units,
  // never replaced, and the optimizer's parameters become each rank's pieces at prepare.
  if (key == "fsdp_version" && value == "2")
    return "acc has one FSDP, not torch's FSDP2 (fully_shard with per-parameter DTensor shards): the trainable "
           "parameters of each unit are one flat buffer sharded over the ranks, as in FSDP1, and FSDP2's settings "
           "are read as well (fsdp_reshard_after_forward true/false; acc::fully_shard(module) in code marks a unit "
           "as fully_shard does)";
  if (key == "fsdp_use_orig_params")
    return "acc always keeps the model's own parameters, as use_orig_params true does: each trainable one "
           "becomes a view into its flat unit (references and named_parameters() stay valid), the optimizer "
           "given to prepare steps each rank's piece of them, and frozen parameters are not sharded";
  return std::nullopt;
}

}  // namespace acc::launcher
