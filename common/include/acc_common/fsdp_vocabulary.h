#pragma once
// The FSDP options of Accelerate's launcher, as one table: config key under `fsdp_config:` (also the flag
// name), the FSDP_* variable the runtime reads, how values are checked, and the value exported when the
// option is unset (Accelerate's launcher defaults). The launcher's flags, config files, questionnaire and
// rank environment read the table; the runtime reads the same names back from the variables, with the
// same lists of choices, so the two wings cannot drift apart.
#include <optional>
#include <string>
#include <vector>

namespace acc::common {

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

// The choices, in the order of the runtime's enums (acc/fsdp.h), which for sharding strategies is also
// the order of Accelerate's legacy numbers 1-5.
const std::vector<std::string>& sharding_strategies();
const std::vector<std::string>& state_dict_types();
const std::vector<std::string>& auto_wrap_policies();
const std::vector<std::string>& backward_prefetches();

// Configs written by older Accelerate versions store the sharding strategy as its enum number: "1" ->
// "FULL_SHARD" ... "5" -> "HYBRID_SHARD_ZERO2"; nullptr for anything else.
const std::string* sharding_strategy_from_number(const std::string& text);

}  // namespace acc::common
