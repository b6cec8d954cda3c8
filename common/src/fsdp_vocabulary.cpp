#include <acc_common/fsdp_vocabulary.h>

#include <acc/environment.h>

namespace acc::common {

const std::vector<std::string>& sharding_strategies() {
  static const std::vector<std::string> names = {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD",
                                                 "HYBRID_SHARD_ZERO2"};
  return names;
}

const std::vector<std::string>& state_dict_types() {
  static const std::vector<std::string> names = {"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"};
  return names;
}

const std::vector<std::string>& auto_wrap_policies() {
  static const std::vector<std::string> names = {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"};
  return names;
}

const std::vector<std::string>& backward_prefetches() {
  static const std::vector<std::string> names = {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"};
  return names;
}

const std::string* sharding_strategy_from_number(const std::string& text) {
  const auto& names = sharding_strategies();
  if (text.size() != 1 || text[0] < '1' || text[0] > '0' + static_cast<int>(names.size())) return nullptr;
  return &names[text[0] - '1'];
}

const std::vector<FsdpOption>& fsdp_options() {
  using K = FsdpValueKind;
  static const std::vector<FsdpOption> options = {
      {"fsdp_version", env::kFsdpVersion, K::kChoice, {"1", "2"}, "1", "FSDP version"},
      {"fsdp_sharding_strategy", env::kFsdpShardingStrategy, K::kChoice, sharding_strategies(), "FULL_SHARD",
       "how parameters, gradients and optimizer state are sharded"},
      {"fsdp_reshard_after_forward", env::kFsdpReshardAfterForward, K::kText, {}, "true",
       "true/false (FSDP2) or FULL_SHARD|SHARD_GRAD_OP|NO_RESHARD (FSDP1)"},
      {"fsdp_offload_params", env::kFsdpOffloadParams, K::kBool, {}, "false",
       "offload parameters and gradients to CPU"},
      {"fsdp_min_num_params", env::kFsdpMinNumParams, K::kInt, {}, "100000000",
       "minimum parameters per unit for SIZE_BASED_WRAP"},
      {"fsdp_auto_wrap_policy", env::kFsdpAutoWrapPolicy, K::kChoice, auto_wrap_policies(), std::nullopt,
       "how modules become FSDP units"},
      {"fsdp_transformer_layer_cls_to_wrap", env::kFsdpTransformerClsToWrap, K::kText, {}, std::nullopt,
       "comma-separated module class names to wrap (TRANSFORMER_BASED_WRAP)"},
      {"fsdp_backward_prefetch", env::kFsdpBackwardPrefetch, K::kChoice, backward_prefetches(), std::nullopt,
       "backward prefetch policy"},
      {"fsdp_state_dict_type", env::kFsdpStateDictType, K::kChoice, state_dict_types(), std::nullopt,
       "checkpoint layout"},
      {"fsdp_forward_prefetch", env::kFsdpForwardPrefetch, K::kBool, {}, "false",
       "prefetch the next all-gather during forward"},
      {"fsdp_use_orig_params", env::kFsdpUseOrigParams, K::kBool, {}, "true",
       "allow frozen and trainable parameters in one unit"},
      {"fsdp_cpu_ram_efficient_loading", env::kFsdpCpuRamEfficientLoading, K::kBool, {}, "true",
       "only rank 0 loads the checkpoint (needs fsdp_sync_module_states)"},
      {"fsdp_sync_module_states", env::kFsdpSyncModuleStates, K::kBool, {}, "true",
       "broadcast parameters from rank 0 when wrapping"},
      {"fsdp_activation_checkpointing", env::kFsdpActivationCheckpointing, K::kBool, {}, "false",
       "recompute activations in backward"},
      {"fsdp_activation_checkpointing_offload", env::kFsdpActivationCheckpointingOffload, K::kBool, {}, "false",
       "offload checkpointed activations to CPU (FSDP2)"},
  };
  return options;
}

const FsdpOption* find_fsdp_option(const std::string& key) {
  const std::string full = key.rfind("fsdp_", 0) == 0 ? key : "fsdp_" + key;
  for (const auto& option : fsdp_options())
    if (option.key == full) return &option;
  return nullptr;
}

}  // namespace acc::common
