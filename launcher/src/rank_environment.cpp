#include "rank_environment.h"

#include <acc/environment.h>
#include <acc_common/new_file.h>
#include <acc_common/rank_variables.h>

extern char** environ;

namespace acc::launcher {

const std::string& job_store_secret() {
  // 32 bytes from the kernel's CSPRNG as 64 hex characters (getrandom blocks until the pool is
  // ready; a kernel without it fails earlier, at the job id).
  static const std::string secret = common::random_hex(32);
  return secret;
}

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
  common::RankPlacement placement;
  placement.local_rank = local_rank;
  placement.rank = plan.machine_rank * plan.local_world_size + local_rank;
  placement.world_size = plan.world_size;
  placement.local_world_size = plan.local_world_size;
  placement.machine_rank = plan.machine_rank;
  placement.master_addr = plan.master_addr;
  placement.master_port = plan.master_port;
  placement.restart_count = restart_count;
  placement.max_restarts = max_restarts;
  placement.mixed_precision = plan.mixed_precision;
  placement.use_cpu = plan.use_cpu;
  for (auto& [name, value] : common::rank_variables(placement)) env[name] = std::move(value);
  const int rank = placement.rank;
  // The descriptor exists in rank 0 only; a number inherited from an outer launch means nothing here.
  env.erase(env::kStoreListenFd);
  if (plan.store_listen_fd && rank == 0) env[env::kStoreListenFd] = std::to_string(*plan.store_listen_fd);
  // An id given by the user (the same on every machine of a multi-machine job) wins.
  if (!plan.job_id.empty() && !env.count(env::kJobId)) env[env::kJobId] = plan.job_id;
  // On one machine every job gets a store secret of its own, which its ranks inherit: the store's
  // port then admits only this job's ranks (the gate, runtime/src/comm/gate/store_gate.h), and no user
  // types or sees it. Only through the environment, which /proc shows to the job's owner alone, never
  // on a command line. A secret the user exported wins; several machines need the same one on each,
  // which only the user can give them (ACC_STORE_SECRET).
  const auto exported = env.find(env::kStoreSecret);
  const bool agent_store = env.count(env::kUseAgentStore) && env.at(env::kUseAgentStore) == "True";
  if (plan.num_machines == 1 && !agent_store && (exported == env.end() || exported->second.empty())) {
    env[env::kStoreSecret] = job_store_secret();
  }

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
