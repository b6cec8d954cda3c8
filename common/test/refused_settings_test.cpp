#include <gtest/gtest.h>

#include <acc_common/refused_settings.h>

#include <map>

namespace {

using namespace acc::common;

VariableLookup variables(std::map<std::string, std::string> values) {
  return [values](const std::string& name) -> std::optional<std::string> {
    const auto found = values.find(name);
    if (found == values.end()) return std::nullopt;
    return found->second;
  };
}

std::vector<std::string> keys_of(const std::vector<Refusal>& refusals) {
  std::vector<std::string> keys;
  for (const auto& refusal : refusals) keys.push_back(refusal.key);
  return keys;
}

TEST(RefusedSettings, BooleansAsAccelerateSpellsThem) {
  for (const char* yes : {"y", "YES", "t", "true", "On", "1"}) EXPECT_EQ(parse_boolean(yes), true) << yes;
  for (const char* no : {"n", "no", "F", "false", "off", "0"}) EXPECT_EQ(parse_boolean(no), false) << no;
  for (const char* neither : {"", "maybe", "2", "FULL_SHARD"}) EXPECT_EQ(parse_boolean(neither), std::nullopt) << neither;
}

TEST(RefusedSettings, ClassNamesAreSplitAtCommasWithoutBlanks) {
  EXPECT_EQ(split_class_names("Block, Embedding ,Head"), (std::vector<std::string>{"Block", "Embedding", "Head"}));
  EXPECT_TRUE(split_class_names(" , ,").empty());
  EXPECT_TRUE(split_class_names("").empty());
}

TEST(RefusedSettings, Fp8IsRefusedInAnyCaseAndTheOthersPass) {
  for (const char* fp8 : {"fp8", "FP8"}) {
    const auto refusal = refuse_mixed_precision(fp8);
    ASSERT_TRUE(refusal) << fp8;
    EXPECT_EQ(refusal->key, "mixed_precision");
    EXPECT_EQ(refusal->fix, "use 'bf16' or 'fp16'");
  }
  for (const char* fine : {"no", "fp16", "bf16", "BF16"}) EXPECT_FALSE(refuse_mixed_precision(fine)) << fine;
}

TEST(RefusedSettings, TransformerWrapNeedsClassNames) {
  const auto refusal = refuse_auto_wrap("transformer_based_wrap", {});
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->key, "fsdp_auto_wrap_policy");
  EXPECT_NE(refusal->why.find("C++ models do not declare them"), std::string::npos) << refusal->why;
  EXPECT_NE(refusal->fix.find("fsdp_transformer_layer_cls_to_wrap"), std::string::npos) << refusal->fix;
  EXPECT_FALSE(refuse_auto_wrap("TRANSFORMER_BASED_WRAP", {"Block"}));
  EXPECT_FALSE(refuse_auto_wrap("SIZE_BASED_WRAP", {}));
  EXPECT_FALSE(refuse_auto_wrap("NO_WRAP", {}));
}

TEST(RefusedSettings, CpuRamEfficientLoadingNeedsSyncModuleStates) {
  EXPECT_TRUE(refuse_cpu_ram_efficient_loading(true, false));
  EXPECT_FALSE(refuse_cpu_ram_efficient_loading(true, true));
  EXPECT_FALSE(refuse_cpu_ram_efficient_loading(false, false));
}

TEST(RefusedSettings, ReshardAfterForwardIsABooleanAndAStrategyNameSaysWhereItGoes) {
  for (const char* fine : {"true", "False", "1", "no"}) EXPECT_FALSE(refuse_reshard_after_forward(fine)) << fine;
  const auto named = refuse_reshard_after_forward("shard_grad_op");
  ASSERT_TRUE(named);
  EXPECT_EQ(named->key, "fsdp_reshard_after_forward");
  EXPECT_NE(named->why.find("'shard_grad_op' is a sharding strategy"), std::string::npos) << named->why;
  EXPECT_NE(named->fix.find("fsdp_sharding_strategy SHARD_GRAD_OP"), std::string::npos) << named->fix;
  const auto other = refuse_reshard_after_forward("sometimes");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->why, "'sometimes' is not a boolean");
}

// The variables of a launch, as a rank reads them: what acc-launch and acc-env check before starting one.
TEST(RefusedSettings, LaunchVariablesAreJudgedAsARankReadsThem) {
  // Accelerate's fsdp.yaml template, as the launcher exports it.
  const std::map<std::string, std::string> template_variables = {
      {"ACCELERATE_MIXED_PRECISION", "bf16"},      {"ACCELERATE_USE_FSDP", "true"},
      {"FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP"}, {"FSDP_CPU_RAM_EFFICIENT_LOADING", "true"},
      {"FSDP_SYNC_MODULE_STATES", "true"},         {"FSDP_RESHARD_AFTER_FORWARD", "true"}};
  EXPECT_EQ(keys_of(refused_launch_variables(variables(template_variables))),
            std::vector<std::string>{"fsdp_auto_wrap_policy"});
  // Class names in the environment (the user's own export) make it runnable, as in the rank.
  auto named = template_variables;
  named["FSDP_TRANSFORMER_CLS_TO_WRAP"] = "Block";
  EXPECT_TRUE(refused_launch_variables(variables(named)).empty());
  // Without FSDP on, FSDP_* mean nothing.
  auto off = template_variables;
  off["ACCELERATE_USE_FSDP"] = "false";
  EXPECT_TRUE(refused_launch_variables(variables(off)).empty());
  off.erase("ACCELERATE_USE_FSDP");
  EXPECT_TRUE(refused_launch_variables(variables(off)).empty());
  // Every refusal, mixed precision first.
  auto all = template_variables;
  all["ACCELERATE_MIXED_PRECISION"] = "fp8";
  all["FSDP_SYNC_MODULE_STATES"] = "false";
  all["FSDP_RESHARD_AFTER_FORWARD"] = "FULL_SHARD";
  EXPECT_EQ(keys_of(refused_launch_variables(variables(all))),
            (std::vector<std::string>{"mixed_precision", "fsdp_cpu_ram_efficient_loading", "fsdp_auto_wrap_policy",
                                      "fsdp_reshard_after_forward"}));
  // The runtime's defaults: cpu_ram_efficient_loading off, sync_module_states on.
  EXPECT_TRUE(refused_launch_variables(variables({{"ACCELERATE_USE_FSDP", "1"}})).empty());
}

}  // namespace
