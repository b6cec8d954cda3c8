#include <gtest/gtest.h>

#include <acc_common/rank_variables.h>

#include <map>

namespace {

// The names are spelled out: they are torchrun's and Accelerate's, and must not drift.
TEST(RankVariables, TorchrunAndAccelerateNames) {
  acc::common::RankPlacement p;
  p.rank = 5;
  p.local_rank = 1;
  p.world_size = 8;
  p.local_world_size = 4;
  p.machine_rank = 1;
  p.master_addr = "10.0.0.1";
  p.master_port = 29500;
  p.restart_count = 2;
  p.max_restarts = 3;
  p.mixed_precision = "bf16";
  p.use_cpu = true;
  const auto list = acc::common::rank_variables(p);
  const std::map<std::string, std::string> got(list.begin(), list.end());
  EXPECT_EQ(got, (std::map<std::string, std::string>{{"RANK", "5"},
                                                     {"LOCAL_RANK", "1"},
                                                     {"WORLD_SIZE", "8"},
                                                     {"LOCAL_WORLD_SIZE", "4"},
                                                     {"GROUP_RANK", "1"},
                                                     {"MASTER_ADDR", "10.0.0.1"},
                                                     {"MASTER_PORT", "29500"},
                                                     {"TORCHELASTIC_RESTART_COUNT", "2"},
                                                     {"TORCHELASTIC_MAX_RESTARTS", "3"},
                                                     {"ACCELERATE_MIXED_PRECISION", "bf16"},
                                                     {"ACCELERATE_USE_CPU", "True"}}));
  EXPECT_EQ(got.size(), list.size());  // no name twice
}

}  // namespace
