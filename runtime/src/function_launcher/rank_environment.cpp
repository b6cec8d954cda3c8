#include "function_launcher/rank_environment.h"

#include <acc/environment.h>
#include <acc/errors.h>
#include <acc_common/job_id.h>
#include <acc_common/rank_variables.h>

#include <system_error>

namespace acc::detail {
namespace {

constexpr const char* kOmpNumThreads = "OMP_NUM_THREADS";

// Variables acc::launch owns, with the option that sets each (for check_extra_environment).
const std::map<std::string, std::string>& owned_variables() {
  static const std::map<std::string, std::string> owned = {
      {env::kRank, "each rank gets its own"},
      {env::kLocalRank, "each rank gets its own"},
      {env::kWorldSize, "it is num_processes"},
      {env::kLocalWorldSize, "it is num_processes"},
      {env::kGroupRank, "always 0: one machine"},
      {env::kMasterAddr, "set LaunchOptions::master_addr instead"},
      {env::kMasterPort, "set LaunchOptions::master_port instead"},
      {env::kRestartCount, "always 0: acc::launch does not restart ranks"},
      {env::kMaxRestarts, "always 0: acc::launch does not restart ranks"},
      {env::kRunId, "each call is a job of its own, with a fresh id"},
      {env::kUseAgentStore, "rank 0 serves the store"},
      {env::kStoreListenFd, "acc::launch reserves the port itself"},
      {env::kJobId, "each call is a job of its own, with a fresh id"},
      {env::kStoreSecret, "each call is a job of its own, with a fresh secret"},
      {env::kMixedPrecision, "set LaunchOptions::mixed_precision instead"},
      {env::kUseCpu, "set LaunchOptions::cpu instead"},
      {kOmpNumThreads, "set LaunchOptions::num_cpu_threads_per_process instead"},
  };
  return owned;
}

}  // namespace

RankEnvironment rank_environment(const JobEnvironment& job, int rank, int listen_fd) {
  RankEnvironment out;
  for (const auto& [name, value] : job.extra) out.set.emplace_back(name, value);
  auto set = [&](const char* name, std::string value) { out.set.emplace_back(name, std::move(value)); };
  // As acc-launch sets them, for one machine: the global and local ranks coincide, and nothing restarts.
  common::RankPlacement placement;
  placement.rank = rank;
  placement.local_rank = rank;
  placement.world_size = job.world_size;
  placement.local_world_size = job.world_size;
  placement.master_addr = job.master_addr;
  placement.master_port = job.master_port;
  placement.mixed_precision = to_string(job.mixed_precision);
  placement.use_cpu = job.cpu;
  for (auto& variable : common::rank_variables(placement)) out.set.push_back(std::move(variable));
  set(env::kJobId, job.job_id);
  set(env::kStoreSecret, job.store_secret);
  // For what the rank starts; the rank's own torch is told with at::set_num_threads (OpenMP read
  // the variable when it was loaded, in the caller).
  set(kOmpNumThreads, std::to_string(job.threads_per_rank));
  if (rank == 0) {
    set(env::kStoreListenFd, std::to_string(listen_fd));
  } else {
    out.unset.emplace_back(env::kStoreListenFd);
  }
  for (const char* name : {env::kRunId, env::kUseAgentStore}) out.unset.emplace_back(name);
  return out;
}

void check_extra_environment(const std::map<std::string, std::string>& extra) {
  const auto& owned = owned_variables();
  for (const auto& [name, value] : extra) {
    if (name.empty() || name.find('=') != std::string::npos) {
      throw ConfigError("acc::launch: LaunchOptions::env has the variable name '" + name +
                        "', which cannot be set (empty or with '='); fix the name");
    }
    if (auto it = owned.find(name); it != owned.end()) {
      throw ConfigError("acc::launch: LaunchOptions::env sets " + name +
                        ", which acc::launch sets for every rank itself (" + it->second + "); remove it from env");
    }
  }
}

std::string new_job_id() {
  try {
    return common::new_job_id();
  } catch (const std::system_error& e) {
    throw Error(std::string("acc::launch: cannot draw a job id from ") + e.what());
  }
}

}  // namespace acc::detail
