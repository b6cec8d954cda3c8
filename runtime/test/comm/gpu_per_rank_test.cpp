// NCCL's one GPU per rank, checked when the process group starts (runtime/src/comm/gpu_per_rank.h):
// which ranks share a GPU, told from the GPUs' UUIDs, not from the indices CUDA_VISIBLE_DEVICES
// renumbers. The exchange itself runs on a GPU (scripts/device-check, nccl_shared_gpu).
#include <gtest/gtest.h>

#include "comm/gpu_per_rank.h"

namespace acc::detail {
namespace {

TEST(GpuPerRank, RanksOnGpusOfTheirOwnShareNothing) {
  EXPECT_EQ(ranks_sharing_a_gpu({}), "");
  EXPECT_EQ(ranks_sharing_a_gpu({{"a", "GPU-0", 0}, {"a", "GPU-1", 1}, {"b", "GPU-0x", 0}}), "");
}

TEST(GpuPerRank, TheSameIndexOnTwoMachinesIsTwoGpus) {
  // Two machines with one GPU each: both ranks see cuda:0, and their UUIDs differ.
  EXPECT_EQ(ranks_sharing_a_gpu({{"a", "GPU-aa", 0}, {"b", "GPU-bb", 0}}), "");
}

TEST(GpuPerRank, TheSameUuidIsOneGpuWhateverItsIndex) {
  // CUDA_VISIBLE_DEVICES=1 for rank 0 and 0,1 for rank 1: one GPU, seen as cuda:0 and cuda:1.
  EXPECT_EQ(ranks_sharing_a_gpu({{"a", "GPU-77", 0}, {"a", "GPU-77", 1}}),
            "ranks 0 (cuda:0) and 1 (cuda:1) share GPU-77 on host 'a'");
}

TEST(GpuPerRank, ContainersOnOneMachineShareAGpuUnderTwoHostNames) {
  EXPECT_EQ(ranks_sharing_a_gpu({{"pod-a", "GPU-77", 0}, {"pod-b", "GPU-77", 0}}),
            "ranks 0 (cuda:0 on host 'pod-a') and 1 (cuda:0 on host 'pod-b') share GPU-77");
}

TEST(GpuPerRank, EverySharedGpuIsNamedFromRankZeroUp) {
  // Four processes on a machine with two GPUs: local rank % 2 puts two ranks on each.
  const std::vector<RankGpu> ranks{{"a", "GPU-1", 1}, {"a", "GPU-0", 0}, {"a", "GPU-1", 1},
                                   {"a", "GPU-0", 0}, {"b", "GPU-9", 0}, {"a", "GPU-0", 0}};
  EXPECT_EQ(ranks_sharing_a_gpu(ranks),
            "ranks 0 (cuda:1) and 2 (cuda:1) share GPU-1 on host 'a'; "
            "ranks 1 (cuda:0), 3 (cuda:0) and 5 (cuda:0) share GPU-0 on host 'a'");
}

}  // namespace
}  // namespace acc::detail
