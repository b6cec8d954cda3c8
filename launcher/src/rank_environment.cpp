#include "rank_environment.h"

#include <acc/environment.h>

extern char** environ;

namespace acc::launcher {

EnvMap current_environment() {
  EnvMap env;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string text = *entry;
    const size_t eq = text.find('=');
    if (eq != std::string::npos) env[text.substr(0, eq)] = text.substr(eq + 1);
  }
  return env;
}

EnvMap rank_environment(const LaunchPlan& plan, int local_rank, int restart_count, int max_restarts,
                        const EnvMap& base) {
  EnvMap env = base;
  const int rank = plan.machine_rank * plan.local_world_size + local_rank;
  env[env::kRank] = std::to_string(rank);
  env[env::kLocalRank] = std::to_string(local_rank);
  env[env::kWorldSize] = std::to_string(plan.world_size);
  env[env::kLocalWorldSize] = std::to_string(plan.local_world_size);
  env[env::kGroupRank] = std::to_string(plan.machine_rank);
  env[env::kMasterAddr] = plan.master_addr;
  env[env::kMasterPort] = std::to_string(plan.master_port);
  env[env::kRestartCount] = std::to_string(restart_count);
  env[env::kMaxRestarts] = std::to_string(max_restarts);
  // The descriptor exists in rank 0 only; a number inherited from an outer launch means nothing here.
  env.erase(env::kStoreListenFd);
  if (plan.store_listen_fd && rank == 0) env[env::kStoreListenFd] = std::to_string(*plan.store_listen_fd);
  // An id given by the user (the same on every machine of a multi-machine job) wins.
  if (!plan.job_id.empty() && !env.count(env::kJobId)) env[env::kJobId] = plan.job_id;

  // Spelled as Accelerate's launcher spells them (str(bool) for USE_CPU, lower case for the rest).
  env[env::kMixedPrecision] = plan.mixed_precision;
  env[env::kUseCpu] = plan.use_cpu ? "True" : "False";
  if (plan.debug) env[env::kDebugMode] = "true";
  if (plan.gradient_accumulation_steps)
    env[env::kGradientAccumulationSteps] = std::to_string(*plan.gradient_accumulation_steps);
  for (const auto& [name, value] : plan.fsdp_env) env[name] = value;
  if (plan.omp_num_threads) env["OMP_NUM_THREADS"] = std::to_string(*plan.omp_num_threads);
  if (plan.cuda_visible_devices) env["CUDA_VISIBLE_DEVICES"] = *plan.cuda_visible_devices;
  return env;
}

std::vector<std::string> to_envp(const EnvMap& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

}  // namespace acc::launcher
