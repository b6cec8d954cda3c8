#include "launch/rank_environment.h"

#include <sys/random.h>

#include <acc/environment.h>
#include <acc/errors.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

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
      {env::kStoreSecret, "the job stays on one machine"},
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
  // One machine: the global and local ranks coincide (torchrun's variables, as acc-launch sets them).
  set(env::kRank, std::to_string(rank));
  set(env::kLocalRank, std::to_string(rank));
  set(env::kWorldSize, std::to_string(job.world_size));
  set(env::kLocalWorldSize, std::to_string(job.world_size));
  set(env::kGroupRank, "0");
  set(env::kMasterAddr, job.master_addr);
  set(env::kMasterPort, std::to_string(job.master_port));
  set(env::kRestartCount, "0");
  set(env::kMaxRestarts, "0");
  set(env::kJobId, job.job_id);
  // Spelled as acc-launch and Accelerate's launcher spell them.
  set(env::kMixedPrecision, to_string(job.mixed_precision));
  set(env::kUseCpu, job.cpu ? "True" : "False");
  // For what the rank starts; the rank's own torch is told with at::set_num_threads (OpenMP read
  // the variable when it was loaded, in the caller).
  set(kOmpNumThreads, std::to_string(job.threads_per_rank));
  if (rank == 0) {
    set(env::kStoreListenFd, std::to_string(listen_fd));
  } else {
    out.unset.emplace_back(env::kStoreListenFd);
  }
  for (const char* name : {env::kRunId, env::kUseAgentStore, env::kStoreSecret}) out.unset.emplace_back(name);
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
  uint8_t bytes[8];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("acc::launch: cannot draw a job id from getrandom: ") + std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (uint8_t b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

}  // namespace acc::detail
