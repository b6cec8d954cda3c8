#include <gtest/gtest.h>

#include <acc_common/fsdp_vocabulary.h>

namespace {

using namespace acc::common;

TEST(FsdpVocabulary, KeysAreFoundWithOrWithoutThePrefix) {
  const FsdpOption* strategy = find_fsdp_option("sharding_strategy");
  ASSERT_NE(strategy, nullptr);
  EXPECT_EQ(strategy, find_fsdp_option("fsdp_sharding_strategy"));
  EXPECT_EQ(strategy->env, "FSDP_SHARDING_STRATEGY");
  EXPECT_EQ(find_fsdp_option("no_such_option"), nullptr);
}

// The table's choices are the lists the runtime parses with: one vocabulary for both wings.
TEST(FsdpVocabulary, TableChoicesAreTheSharedLists) {
  EXPECT_EQ(find_fsdp_option("sharding_strategy")->choices, sharding_strategies());
  EXPECT_EQ(find_fsdp_option("state_dict_type")->choices, state_dict_types());
  EXPECT_EQ(find_fsdp_option("auto_wrap_policy")->choices, auto_wrap_policies());
  EXPECT_EQ(find_fsdp_option("backward_prefetch")->choices, backward_prefetches());
}

TEST(FsdpVocabulary, LegacyShardingNumbers) {
  ASSERT_NE(sharding_strategy_from_number("1"), nullptr);
  EXPECT_EQ(*sharding_strategy_from_number("1"), "FULL_SHARD");
  EXPECT_EQ(*sharding_strategy_from_number("5"), "HYBRID_SHARD_ZERO2");
  EXPECT_EQ(sharding_strategy_from_number("0"), nullptr);
  EXPECT_EQ(sharding_strategy_from_number("6"), nullptr);
  EXPECT_EQ(sharding_strategy_from_number("12"), nullptr);
  EXPECT_EQ(sharding_strategy_from_number("FULL_SHARD"), nullptr);
}

}  // namespace
