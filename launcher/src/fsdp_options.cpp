#include "fsdp_options.h"

#include <algorithm>
#include <cctype>

#include <acc/environment.h>

#include "launch_settings.h"

namespace acc::launcher {

const std::vector<FsdpOption>& fsdp_options() {
  using K = FsdpValueKind;
  static const std::vector<FsdpOption> options = {
      {"fsdp_version", env::kFsdpVersion, K::kChoice, {"1", "2"}, "1", "FSDP version"},
      {"fsdp_sharding_strategy", env::kFsdpShardingStrategy, K::kChoice,
       {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"}, "FULL_SHARD",
       "how parameters, gradients and optimizer state are sharded"},
      {"fsdp_reshard_after_forward", env::kFsdpReshardAfterForward, K::kText, {}, "true",
       "true/false (FSDP2) or FULL_SHARD|SHARD_GRAD_OP|NO_RESHARD (FSDP1)"},
      {"fsdp_offload_params", env::kFsdpOffloadParams, K::kBool, {}, "false",
       "offload parameters and gradients to CPU"},
      {"fsdp_min_num_params", env::kFsdpMinNumParams, K::kInt, {}, "100000000",
       "minimum parameters per unit for SIZE_BASED_WRAP"},
      {"fsdp_auto_wrap_policy", env::kFsdpAutoWrapPolicy, K::kChoice,
       {"TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP"}, std::nullopt, "how modules become FSDP units"},
      {"fsdp_transformer_layer_cls_to_wrap", env::kFsdpTransformerClsToWrap, K::kText, {}, std::nullopt,
       "comma-separated module class names to wrap (TRANSFORMER_BASED_WRAP)"},
      {"fsdp_backward_prefetch", env::kFsdpBackwardPrefetch, K::kChoice,
       {"BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH"}, std::nullopt, "backward prefetch policy"},
      {"fsdp_state_dict_type", env::kFsdpStateDictType, K::kChoice,
       {"FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT"}, std::nullopt, "checkpoint layout"},
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

std::string normalize_fsdp_value(const FsdpOption& option, const std::string& raw, const std::string& what) {
  switch (option.kind) {
    case FsdpValueKind::kBool:
      return parse_bool(raw, what) ? "true" : "false";
    case FsdpValueKind::kInt:
      return std::to_string(parse_int(raw, what, 0));
    case FsdpValueKind::kChoice: {
      std::string value = raw;
      std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::toupper(c); });
      // Configs written by older Accelerate versions store the sharding strategy as its enum number.
      if (option.key == "fsdp_sharding_strategy" && value.size() == 1 && value[0] >= '1' && value[0] <= '5')
        value = option.choices[value[0] - '1'];
      return parse_choice(value, option.choices, what);
    }
    case FsdpValueKind::kText:
      break;
  }
  // reshard_after_forward is a boolean for FSDP2 and a strategy name for FSDP1: keep booleans in
  // Accelerate's lower-case spelling, pass names through.
  std::string lowered = raw;
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
  if (option.key == "fsdp_reshard_after_forward" && (lowered == "true" || lowered == "false")) return lowered;
  return raw;
}

}  // namespace acc::launcher
