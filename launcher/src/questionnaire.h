#pragma once
// The interactive `acc-config`: questions with defaults, each answer checked and asked again when
// invalid, producing settings in Accelerate's schema. Streams are parameters so tests can drive it.
#include <istream>
#include <ostream>

#include "launch_plan.h"
#include "launch_settings.h"

namespace acc::launcher {

// Throws UsageError when the input ends before the last answer (nothing should be written then).
LaunchSettings ask_launch_settings(std::istream& in, std::ostream& out, const MachineFacts& facts);

// Asks a yes/no question; `default_answer` is taken for an empty line.
bool ask_yes_no(std::istream& in, std::ostream& out, const std::string& question, bool default_answer);

// What `acc-config default` writes (Accelerate's write_basic_config): one process per GPU, or one CPU
// process when there is no GPU.
LaunchSettings basic_settings(const MachineFacts& facts, const std::string& mixed_precision);

}  // namespace acc::launcher
