#include "rank_environment.h"

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
  env["RANK"] = std::to_string(rank);
  env["LOCAL_RANK"] = std::to_string(local_rank);
  env["WORLD_SIZE"] = std::to_string(plan.world_size);
  env["LOCAL_WORLD_SIZE"] = std::to_string(plan.local_world_size);
  env["GROUP_RANK"] = std::to_string(plan.machine_rank);
  env["MASTER_ADDR"] = plan.master_addr;
  env["MASTER_PORT"] = std::to_string(plan.master_port);
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(max_restarts);

  // Spelled as Accelerate's launcher spells them (str(bool) for USE_CPU, lower case for the rest).
  env["ACCELERATE_MIXED_PRECISION"] = plan.mixed_precision;
  env["ACCELERATE_USE_CPU"] = plan.use_cpu ? "True" : "False";
  if (plan.debug) env["ACCELERATE_DEBUG_MODE"] = "true";
  if (plan.gradient_accumulation_steps)
    env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = std::to_string(*plan.gradient_accumulation_steps);
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
