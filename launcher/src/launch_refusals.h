#pragma once
// What the ranks would refuse at startup, said before any of them starts. The variables a launch gives the
// ranks are judged by the runtime's own rules (acc_common/refused_settings.h, which the runtime throws
// from), and each refusal is placed where the user set it: a flag, or a config file's line. acc-launch
// refuses the launch (exit 2); acc-env lists them under the config.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch_plan.h"
#include "launch_settings.h"

namespace acc::launcher {

// Where the settings of a launch came from, for naming them: the flags given, and the config file with
// the line of each key it set (ConfigFile::lines).
struct SettingSources {
  LaunchSettings flags;
  std::optional<std::string> config_path;
  std::map<std::string, int> config_lines;
};

struct LaunchRefusal {
  std::string message;  // one line: place, key, why, fix
  // accelerate launch refuses it too, for any program (fsdp_cpu_ram_efficient_loading without
  // fsdp_sync_module_states); otherwise only acc programs refuse it, and a Python program may run with it.
  bool every_program = false;
};

// `variables`: the environment a rank would start with (rank_environment(), or configured_variables()).
std::vector<LaunchRefusal> launch_refusals(const EnvMap& variables, const SettingSources& sources);

// The variables of `settings` that the runtime judges (ACCELERATE_MIXED_PRECISION, and under FSDP
// ACCELERATE_USE_FSDP and FSDP_*), over `inherited`, the environment ranks inherit: what a rank reads, for
// acc-env, which has no launch plan (the config alone may leave num_processes to the command line).
EnvMap configured_variables(const LaunchSettings& settings, const EnvMap& inherited);

// Under FSDP, one note per FSDP setting acc passes on but does not act on (fsdp_version 2,
// fsdp_use_orig_params), with what acc does instead, placed as refusals are.
std::vector<std::string> ignored_fsdp_notes(const LaunchSettings& settings, const SettingSources& sources);

}  // namespace acc::launcher
