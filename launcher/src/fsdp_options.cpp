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

}  // namespace acc::launcher
