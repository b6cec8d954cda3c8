#pragma once
// NCCL needs a GPU of its own for each rank. Two ranks on one GPU (more processes than GPUs on a
// machine, or a CUDA_VISIBLE_DEVICES that gives two ranks the same GPU) fail inside NCCL, at the
// first collective, as "invalid usage". acc compares the ranks' GPUs when the process group starts
// and names the ranks and the fix instead.
#include <string>
#include <vector>

namespace acc::detail {

class ProcessGroup;

/// One rank's GPU: the physical GPU (its UUID, the same in every process) and the index this rank
/// sees it under (CUDA_VISIBLE_DEVICES renumbers).
struct RankGpu {
  std::string host;
  std::string uuid;
  int index = 0;
};

/// "" when no two ranks share a GPU (the same UUID); else which do, e.g. "ranks 0 (cuda:0) and 2
/// (cuda:0) share GPU-5a1c... on host 'node1'", groups joined by "; ". Ranks of one GPU under
/// different host names (containers on one machine) are each named with their host.
std::string ranks_sharing_a_gpu(const std::vector<RankGpu>& gpu_of_rank);

/// This process's GPU: the current CUDA device (needs libacc_cuda.so).
RankGpu this_rank_gpu();

/// Exchanges `mine` with every rank through `group`'s store and throws the same DistributedError on
/// every rank if two share a GPU.
void check_one_gpu_per_rank(ProcessGroup& group, const RankGpu& mine);

}  // namespace acc::detail
