#pragma once
// The FSDP options of Accelerate's launcher: the table itself is shared with the runtime
// (acc_common/fsdp_vocabulary.h); checking values given on the command line, in config files and in
// the questionnaire is the launcher's own.
#include <optional>
#include <string>

#include <acc_common/fsdp_vocabulary.h>

namespace acc::launcher {

using common::find_fsdp_option;
using common::fsdp_options;
using common::FsdpOption;
using common::FsdpValueKind;

// Checks and normalizes a value (booleans become "true"/"false", choices upper case, Accelerate's legacy
// numeric sharding strategies become names). Throws UsageError naming `what` and the allowed values.
std::string normalize_fsdp_value(const FsdpOption& option, const std::string& raw, const std::string& what);

// For an FSDP setting acc passes on to the ranks (Python programs read it) but does not act on itself:
// what acc does instead, for the launcher's note. nullopt for settings acc uses, and for fsdp_version 1
// (what acc's FSDP is closest to). `value` is normalized.
std::optional<std::string> ignored_fsdp_setting(const std::string& key, const std::string& value);

}  // namespace acc::launcher
