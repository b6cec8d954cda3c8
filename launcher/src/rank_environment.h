#pragma once
// The environment each rank starts with: the launcher's own, plus torchrun's rank variables and
// Accelerate's configuration variables (the only channel between acc-launch and the runtime).
#include <string>
#include <vector>

#include "launch_plan.h"

namespace acc::launcher {

EnvMap current_environment();

// The rendezvous store secret that rank_environment() gives the ranks of a one-machine job: made once
// per launcher process (one job, kept across restarts), from the kernel's CSPRNG (acc_common::random_hex).
const std::string& job_store_secret();

// `restart_count` is how many times the group was restarted (TORCHELASTIC_RESTART_COUNT, as torchrun).
EnvMap rank_environment(const LaunchPlan& plan, int local_rank, int restart_count, int max_restarts,
                        const EnvMap& base);

// "NAME=value" strings for execve.
std::vector<std::string> to_envp(const EnvMap& env);

}  // namespace acc::launcher
