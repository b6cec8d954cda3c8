// FSDP configuration: argument > FSDP_* environment > Accelerate's defaults, and clear errors.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include <acc/accelerator.h>
#include <acc/errors.h>
#include <acc/fsdp.h>
#include <acc/options.h>

#include "error_text.h"
#include "env_fixture.h"
#include "fsdp/wrap_policy.h"

namespace {

using acc::ShardingStrategy;
using acc::StateDictType;
using acc::testing::fake_env;

std::string config_error(const std::function<void()>& body) {
  return acc::testing::error_text<acc::ConfigError>(body, "");
}

TEST(FsdpConfig, OffUnlessAskedFor) {
  // FSDP_* alone does not turn FSDP on (nor is it parsed), as in Accelerate.
  auto resolved = acc::resolve_options(
      acc::AcceleratorOptions().environment(fake_env({{"FSDP_SHARDING_STRATEGY", "bogus"}})));
  EXPECT_FALSE(resolved.use_fsdp);
}

TEST(FsdpConfig, DefaultsAreAccelerates) {
  auto resolved = acc::resolve_options(
      acc::AcceleratorOptions().environment(fake_env({{"ACCELERATE_USE_FSDP", "true"}})));
  ASSERT_TRUE(resolved.use_fsdp);
  EXPECT_EQ(resolved.fsdp.sharding_strategy, ShardingStrategy::FULL_SHARD);
  EXPECT_EQ(resolved.fsdp.state_dict_type, StateDictType::FULL_STATE_DICT);
  EXPECT_FALSE(resolved.fsdp.offload_params);
  EXPECT_TRUE(resolved.fsdp.sync_module_states);
}

TEST(FsdpConfig, EnvironmentAsTheLauncherWritesIt) {
  auto resolved = acc::resolve_options(acc::AcceleratorOptions().environment(
      fake_env({{"ACCELERATE_USE_FSDP", "true"}, {"FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP"},
                {"FSDP_STATE_DICT_TYPE", "SHARDED_STATE_DICT"}, {"FSDP_OFFLOAD_PARAMS", "true"},
                {"FSDP_SYNC_MODULE_STATES", "false"}})));
  EXPECT_EQ(resolved.fsdp.sharding_strategy, ShardingStrategy::SHARD_GRAD_OP);
  EXPECT_EQ(resolved.fsdp.state_dict_type, StateDictType::SHARDED_STATE_DICT);
  EXPECT_TRUE(resolved.fsdp.offload_params);
  EXPECT_FALSE(resolved.fsdp.sync_module_states);
}

TEST(FsdpConfig, CpuRamEfficientLoadingNeedsSyncModuleStates) {
  auto env = [](std::map<std::string, std::string> vars) {
    vars["ACCELERATE_USE_FSDP"] = "true";
    return acc::AcceleratorOptions().environment(fake_env(vars));
  };
  EXPECT_FALSE(acc::resolve_options(env({})).fsdp.cpu_ram_efficient_loading);
  EXPECT_TRUE(acc::resolve_options(env({{"FSDP_CPU_RAM_EFFICIENT_LOADING", "true"}})).fsdp.cpu_ram_efficient_loading);
  // The argument wins over the environment, as for every field.
  auto argument = env({{"FSDP_CPU_RAM_EFFICIENT_LOADING", "true"}})
                      .fsdp_plugin(acc::FullyShardedDataParallelPlugin().cpu_ram_efficient_loading(false));
  EXPECT_FALSE(acc::resolve_options(argument).fsdp.cpu_ram_efficient_loading);
  auto message = config_error([&] {
    acc::resolve_options(env({{"FSDP_CPU_RAM_EFFICIENT_LOADING", "true"}, {"FSDP_SYNC_MODULE_STATES", "false"}}));
  });
  EXPECT_NE(message.find("cpu_ram_efficient_loading needs sync_module_states"), std::string::npos) << message;
  EXPECT_NE(message.find("FSDP_SYNC_MODULE_STATES=true"), std::string::npos) << message;
  auto bad = config_error([&] { acc::resolve_options(env({{"FSDP_CPU_RAM_EFFICIENT_LOADING", "maybe"}})); });
  EXPECT_NE(bad.find("FSDP_CPU_RAM_EFFICIENT_LOADING"), std::string::npos) << bad;
}

TEST(FsdpConfig, LegacyNumbersAndAnyCase) {
  const ShardingStrategy in_order[] = {ShardingStrategy::FULL_SHARD, ShardingStrategy::SHARD_GRAD_OP,
                                       ShardingStrategy::NO_SHARD, ShardingStrategy::HYBRID_SHARD,
                                       ShardingStrategy::HYBRID_SHARD_ZERO2};
  for (int n = 1; n <= 5; ++n) {
    EXPECT_EQ(acc::parse_sharding_strategy(std::to_string(n), "test"), in_order[n - 1]);
    EXPECT_EQ(acc::parse_sharding_strategy(acc::to_string(in_order[n - 1]), "test"), in_order[n - 1]);
  }
  EXPECT_EQ(acc::parse_sharding_strategy("shard_grad_op", "test"), ShardingStrategy::SHARD_GRAD_OP);
  EXPECT_EQ(acc::parse_state_dict_type("full_state_dict", "test"), StateDictType::FULL_STATE_DICT);
}

TEST(FsdpConfig, ArgumentOverEnvironmentFieldByField) {
  auto resolved = acc::resolve_options(
      acc::AcceleratorOptions()
          .fsdp_plugin(acc::FullyShardedDataParallelPlugin().sharding_strategy(ShardingStrategy::NO_SHARD))
          .environment(fake_env({{"FSDP_SHARDING_STRATEGY", "2"}, {"FSDP_OFFLOAD_PARAMS", "1"}})));
  EXPECT_TRUE(resolved.use_fsdp);  // a plugin in code turns FSDP on without ACCELERATE_USE_FSDP
  EXPECT_EQ(resolved.fsdp.sharding_strategy, ShardingStrategy::NO_SHARD);
  EXPECT_TRUE(resolved.fsdp.offload_params);  // unset in the plugin: the environment's
}

TEST(FsdpConfig, BadValuesNameTheVariableAndTheChoices) {
  auto env = [](std::map<std::string, std::string> vars) {
    vars["ACCELERATE_USE_FSDP"] = "1";
    return acc::AcceleratorOptions().environment(fake_env(vars));
  };
  auto strategy = config_error([&] { acc::resolve_options(env({{"FSDP_SHARDING_STRATEGY", "ZERO3"}})); });
  EXPECT_NE(strategy.find("FSDP_SHARDING_STRATEGY"), std::string::npos) << strategy;
  EXPECT_NE(strategy.find("'ZERO3'"), std::string::npos) << strategy;
  EXPECT_NE(strategy.find("SHARD_GRAD_OP"), std::string::npos) << strategy;
  auto numbered = config_error([&] { acc::resolve_options(env({{"FSDP_SHARDING_STRATEGY", "6"}})); });
  EXPECT_NE(numbered.find("numbers 1-5"), std::string::npos) << numbered;
  auto type = config_error([&] { acc::resolve_options(env({{"FSDP_STATE_DICT_TYPE", "FULL"}})); });
  EXPECT_NE(type.find("FSDP_STATE_DICT_TYPE"), std::string::npos) << type;
  EXPECT_NE(type.find("SHARDED_STATE_DICT"), std::string::npos) << type;
  auto offload = config_error([&] { acc::resolve_options(env({{"FSDP_OFFLOAD_PARAMS", "perhaps"}})); });
  EXPECT_NE(offload.find("FSDP_OFFLOAD_PARAMS"), std::string::npos) << offload;
  auto cap = config_error([&] {
    acc::resolve_options(acc::AcceleratorOptions().fsdp_plugin(
        acc::FullyShardedDataParallelPlugin().bucket_cap_mb(0)).environment(fake_env({})));
  });
  EXPECT_NE(cap.find("bucket_cap_mb"), std::string::npos) << cap;
}

TEST(FsdpConfig, WrapPolicyFromEnvironmentAndArguments) {
  auto resolved = acc::resolve_options(acc::AcceleratorOptions().environment(
      fake_env({{"ACCELERATE_USE_FSDP", "true"},
                {"FSDP_AUTO_WRAP_POLICY", "transformer_based_wrap"},
                {"FSDP_TRANSFORMER_CLS_TO_WRAP", "Block, DecoderLayer"},
                {"FSDP_MIN_NUM_PARAMS", "2000"},
                {"FSDP_RESHARD_AFTER_FORWARD", "false"}})));
  EXPECT_EQ(resolved.fsdp.auto_wrap_policy, acc::AutoWrapPolicy::TRANSFORMER_BASED_WRAP);
  EXPECT_EQ(resolved.fsdp.transformer_cls_names_to_wrap, (std::vector<std::string>{"Block", "DecoderLayer"}));
  EXPECT_EQ(resolved.fsdp.min_num_params, 2000);
  EXPECT_FALSE(resolved.fsdp.reshard_after_forward);
  // An argument wins field by field.
  auto argued = acc::resolve_options(
      acc::AcceleratorOptions()
          .fsdp_plugin(acc::FullyShardedDataParallelPlugin().auto_wrap_policy(acc::AutoWrapPolicy::SIZE_BASED_WRAP))
          .environment(fake_env({{"ACCELERATE_USE_FSDP", "true"}, {"FSDP_AUTO_WRAP_POLICY", "NO_WRAP"}})));
  EXPECT_EQ(argued.fsdp.auto_wrap_policy, acc::AutoWrapPolicy::SIZE_BASED_WRAP);
  EXPECT_EQ(argued.fsdp.min_num_params, 100000000);  // torch's default
  EXPECT_TRUE(argued.fsdp.reshard_after_forward);

  auto bad_policy = config_error([&] {
    acc::resolve_options(acc::AcceleratorOptions().environment(
        fake_env({{"ACCELERATE_USE_FSDP", "true"}, {"FSDP_AUTO_WRAP_POLICY", "LAYER_WRAP"}})));
  });
  EXPECT_NE(bad_policy.find("FSDP_AUTO_WRAP_POLICY"), std::string::npos) << bad_policy;
  EXPECT_NE(bad_policy.find("TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP"), std::string::npos) << bad_policy;
  auto bad_count = config_error([&] {
    acc::resolve_options(acc::AcceleratorOptions().environment(
        fake_env({{"ACCELERATE_USE_FSDP", "true"}, {"FSDP_MIN_NUM_PARAMS", "1e6x"}})));
  });
  EXPECT_NE(bad_count.find("FSDP_MIN_NUM_PARAMS='1e6x'"), std::string::npos) << bad_count;
}

TEST(FsdpConfig, TransformerWrapWithoutClassNamesSaysWhatToSet) {
  auto message = config_error([&] {
    acc::Accelerator accelerator(acc::AcceleratorOptions().environment(
        fake_env({{"ACCELERATE_USE_FSDP", "true"}, {"FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP"}})));
  });
  EXPECT_NE(message.find("FSDP_TRANSFORMER_CLS_TO_WRAP=Block"), std::string::npos) << message;
}

TEST(FsdpConfig, TransformerWrapMatchesImplAndNamespaces) {
  EXPECT_TRUE(acc::detail::module_type_matches("BlockImpl", "Block"));
  EXPECT_TRUE(acc::detail::module_type_matches("my::BlockImpl", "Block"));
  EXPECT_TRUE(acc::detail::module_type_matches("Block", "BlockImpl"));
  EXPECT_FALSE(acc::detail::module_type_matches("BlockListImpl", "Block"));
}

TEST(FsdpConfig, SupportedStrategiesRunOnOneProcess) {
  for (auto strategy : {ShardingStrategy::FULL_SHARD, ShardingStrategy::NO_SHARD, ShardingStrategy::SHARD_GRAD_OP,
                        ShardingStrategy::HYBRID_SHARD, ShardingStrategy::HYBRID_SHARD_ZERO2}) {
    acc::Accelerator accelerator(acc::AcceleratorOptions()
                                     .fsdp_plugin(acc::FullyShardedDataParallelPlugin().sharding_strategy(strategy))
                                     .environment(fake_env({})));
    // Accelerate reports FSDP only for a distributed run.
    EXPECT_EQ(accelerator.distributed_type(), acc::DistributedType::NO);
    acc::PartialState::destroy();
  }
}

}  // namespace
