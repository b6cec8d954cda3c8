#pragma once
// The FSDP options of Accelerate's launcher, as one table: config key under `fsdp_config:` (also the flag
// name), the FSDP_* variable the runtime reads, how values are checked, and the value exported when the
// option is unset (Accelerate's launcher defaults). Flags, config files, the questionnaire and the
// environment builder all read this table, so the four cannot drift apart.
#include <optional>
#include <string>
#include <vector>

namespace acc::launcher {

enum class FsdpValueKind { kBool, kInt, kChoice, kText };

struct FsdpOption {
  std::string key;  // "fsdp_sharding_strategy"
  std::string env;  // "FSDP_SHARDING_STRATEGY"
  FsdpValueKind kind;
  std::vector<std::string> choices;  // kChoice only
  std::optional<std::string> default_value;  // exported when unset; nullopt: not exported
  std::string help;
};

const std::vector<FsdpOption>& fsdp_options();

// Config files may omit the "fsdp_" prefix inside fsdp_config (Accelerate adds it); returns nullptr for
// unknown keys.
const FsdpOption* find_fsdp_option(const std::string& key);

// Checks and normalizes a value (booleans become "true"/"false", choices upper case, Accelerate's legacy
// numeric sharding strategies become names). Throws UsageError naming `what` and the allowed values.
std::string normalize_fsdp_value(const FsdpOption& option, const std::string& raw, const std::string& what);

}  // namespace acc::launcher
