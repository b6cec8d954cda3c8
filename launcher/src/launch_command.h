#pragma once
// acc-launch's command line and the launch itself, shared with acc-test (which launches its check
// program with the same flags and config).
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "launch_settings.h"
#include "supervisor.h"

namespace acc::launcher {

struct LaunchInvocation {
  LaunchSettings flags;  // only what the command line set
  std::optional<std::string> config_file;
  SupervisorOptions supervision;
  int hardware_flags = 0;  // how many of --cpu, --multi_gpu, --use_fsdp were given (Accelerate allows one)
};

// Registers the flags of `accelerate launch` that acc implements, in both spellings, writing into `into`.
void add_launch_flags(CLI::App& app, LaunchInvocation& into);

// Checks combinations Accelerate rejects too (after parsing). Throws UsageError.
void check_flag_combinations(const LaunchInvocation& invocation);

// Reads the config (--config_file, else the default file), layers the flags over it, resolves the plan,
// settles the port, prints notes and supervises the ranks. Returns acc-launch's exit status.
int run_launch(const LaunchInvocation& invocation);

std::string version_text(const std::string& tool);

}  // namespace acc::launcher
