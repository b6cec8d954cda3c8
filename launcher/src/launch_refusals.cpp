#include "launch_refusals.h"

#include <acc/environment.h>
#include <acc_common/refused_settings.h>

#include "fsdp_options.h"

namespace acc::launcher {
namespace {

// How a message names `key`: the flag when one set it (flags win over the file), else the config file's
// line, else the key alone (a default, or a variable the ranks inherit).
std::string place(const std::string& key, const SettingSources& sources) {
  const bool flag = key == "mixed_precision" ? sources.flags.mixed_precision.has_value() : sources.flags.fsdp.count(key) > 0;
  if (flag) return "--" + key;
  const auto line = sources.config_lines.find(key);
  if (sources.config_path && line != sources.config_lines.end())
    return *sources.config_path + ":" + std::to_string(line->second) + ": " + key;
  return key;
}

}  // namespace

std::vector<LaunchRefusal> launch_refusals(const EnvMap& variables, const SettingSources& sources) {
  const auto lookup = [&variables](const std::string& name) -> std::optional<std::string> {
    const auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  };
  std::vector<LaunchRefusal> out;
  for (const common::Refusal& refusal : common::refused_launch_variables(lookup))
    out.push_back({place(refusal.key, sources) + ": " + refusal.why + "; " + refusal.fix,
                   refusal.key == "fsdp_cpu_ram_efficient_loading"});
  return out;
}

EnvMap configured_variables(const LaunchSettings& settings, const EnvMap& inherited) {
  EnvMap variables = inherited;
  // As rank_environment() sets them from the plan (resolve_plan: FSDP only when asked for by name).
  variables[env::kMixedPrecision] = settings.mixed_precision.value_or("no");
  if (settings.distributed_type == DistributedType::kFsdp)
    for (const auto& [name, value] : fsdp_environment(settings)) variables[name] = value;
  return variables;
}

std::vector<std::string> ignored_fsdp_notes(const LaunchSettings& settings, const SettingSources& sources) {
  std::vector<std::string> notes;
  // Without FSDP every fsdp_* setting is ignored, and resolve_plan says so once.
  if (settings.distributed_type != DistributedType::kFsdp) return notes;
  for (const FsdpOption& option : fsdp_options()) {
    const auto chosen = settings.fsdp.find(option.key);
    if (chosen == settings.fsdp.end()) continue;
    if (const auto instead = ignored_fsdp_setting(option.key, chosen->second))
      notes.push_back(place(option.key, sources) + ": " + chosen->second + " is ignored: " + *instead);
  }
  return notes;
}

}  // namespace acc::launcher
