#include <acc_common/rank_variables.h>

#include <acc/environment.h>

namespace acc::common {

std::vector<std::pair<std::string, std::string>> rank_variables(const RankPlacement& p) {
  return {
      {env::kRank, std::to_string(p.rank)},
      {env::kLocalRank, std::to_string(p.local_rank)},
      {env::kWorldSize, std::to_string(p.world_size)},
      {env::kLocalWorldSize, std::to_string(p.local_world_size)},
      {env::kGroupRank, std::to_string(p.machine_rank)},
      {env::kMasterAddr, p.master_addr},
      {env::kMasterPort, std::to_string(p.master_port)},
      {env::kRestartCount, std::to_string(p.restart_count)},
      {env::kMaxRestarts, std::to_string(p.max_restarts)},
      // As Accelerate's launcher spells them: str(bool) for USE_CPU, lower case for the precision.
      {env::kMixedPrecision, p.mixed_precision},
      {env::kUseCpu, p.use_cpu ? "True" : "False"},
  };
}

}  // namespace acc::common
