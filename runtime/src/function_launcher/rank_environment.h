#pragma once
// The environment of each rank of acc::launch: acc-launch's variables (contract/acc/environment.h),
// computed in the caller before the fork and applied in the child (never to the caller's own
// environment). Torch-free.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <acc/options.h>

namespace acc::detail {

/// What every rank of one acc::launch call shares.
struct JobEnvironment {
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  std::string job_id;
  /// ACC_STORE_SECRET of every rank (comm/gate/store_gate.h): the store admits only this job's ranks, as
  /// acc-launch's one-machine jobs do.
  std::string store_secret;
  MixedPrecision mixed_precision = MixedPrecision::NO;
  bool cpu = false;
  int threads_per_rank = 1;
  std::map<std::string, std::string> extra;  // LaunchOptions::env
};

/// The variables one rank sets, in order, and those it removes (left over from a launcher that
/// started the caller: they would point rank 0 at another job's store).
struct RankEnvironment {
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::string> unset;
};

/// Rank `rank`'s environment; `listen_fd` is the rendezvous socket that rank 0 inherits.
RankEnvironment rank_environment(const JobEnvironment& job, int rank, int listen_fd);

/// Throws ConfigError when LaunchOptions::env names a variable that acc::launch sets itself,
/// naming the option to use instead.
void check_extra_environment(const std::map<std::string, std::string>& extra);

/// A fresh job id: 16 hex digits from the kernel's random source (acc_common/job_id.h), or Error.
std::string new_job_id();

}  // namespace acc::detail
