#pragma once
// The variables that tell a rank who it is, spelled as torchrun and Accelerate's launcher spell them
// (contract/acc/environment.h): the part of a rank's environment acc-launch and acc::launch both set.
// What else each sets (the store socket, the job id, FSDP, threads) is the wing's own.
#include <string>
#include <utility>
#include <vector>

namespace acc::common {

struct RankPlacement {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int machine_rank = 0;  // GROUP_RANK
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;  // how many times the group was restarted, as torchrun counts
  int max_restarts = 0;
  std::string mixed_precision = "no";  // Accelerate's spelling: no, fp16, bf16
  bool use_cpu = false;
};

// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, ACCELERATE_MIXED_PRECISION, ACCELERATE_USE_CPU.
std::vector<std::pair<std::string, std::string>> rank_variables(const RankPlacement& placement);

}  // namespace acc::common
