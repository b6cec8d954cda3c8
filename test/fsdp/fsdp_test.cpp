// FSDP multi-process tests: each starts 2 or 4 ranks of acc_fsdp_worker on loopback under a hard
// deadline (spawn_ranks kills and reaps whatever outlives it).
#include <gtest/gtest.h>

#include <filesystem>
#include <ostream>
#include <string>
#include <unistd.h>

#include "spawn.h"

namespace {

using acc::testing::spawn_ranks;
using std::chrono::seconds;

std::string worker() { return acc::testing::executable_dir() + "/acc_fsdp_worker"; }

struct Case {
  std::string strategy;
  int ranks;
  int local_world_size;  // fakes ranks / local_world_size machines
};

// Readable in test output (gtest would print the bytes).
void PrintTo(const Case& c, std::ostream* out) {
  *out << c.strategy << " on " << c.ranks << " ranks, " << c.local_world_size << " per machine";
}

class Equivalence : public ::testing::TestWithParam<Case> {};

// 10 Adam steps (also with gradient accumulation and with clip_grad_norm_) equal DDP and one
// process on the global batch; gradient and optimizer-state bytes are 1/shards of DDP's.
TEST_P(Equivalence, AdamMatchesDdpAndOneProcess) {
  const auto& c = GetParam();
  auto result = spawn_ranks(worker(), {"equivalence", c.strategy}, c.ranks, seconds(240),
                            {{"ACC_TEST_LOCAL_WORLD_SIZE", std::to_string(c.local_world_size)}});
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

INSTANTIATE_TEST_SUITE_P(
    Fsdp, Equivalence,
    ::testing::Values(Case{"NO_SHARD", 2, 2}, Case{"NO_SHARD", 4, 4}, Case{"SHARD_GRAD_OP", 2, 2},
                      Case{"SHARD_GRAD_OP", 4, 4}, Case{"HYBRID_SHARD_ZERO2", 2, 1},
                      Case{"HYBRID_SHARD_ZERO2", 4, 2}),
    [](const auto& info) {
      return info.param.strategy + "_" + std::to_string(info.param.ranks) + "Ranks_" +
             std::to_string(info.param.ranks / info.param.local_world_size) + "Machines";
    });

TEST(Fsdp, RejectsWhatItCannotShardAndSavesFullModel) {
  const auto directory = std::filesystem::temp_directory_path() /
                         ("acc-fsdp-save-" + std::to_string(::getpid()));
  auto result = spawn_ranks(worker(), {"rejections_and_save_model", directory.string()}, 2, seconds(120));
  EXPECT_TRUE(result.all_succeeded()) << result.describe();
}

}  // namespace
