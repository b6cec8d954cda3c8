#pragma once
// FULL_SHARD's units: which modules are gathered and released as one (Accelerate's wrap policies
// and acc::fully_shard), and which trainable parameters each holds.
#include <torch/nn/module.h>

#include <string>
#include <vector>

#include <acc/fsdp.h>

#include "parallel/gradient_sync.h"
#include "hooks/module_type.h"  // module_type_matches: TRANSFORMER_BASED_WRAP's test

namespace acc::detail {

struct UnitModule {
  torch::nn::Module* module = nullptr;
  std::string path;            // in named_modules(); "" for the root
  std::vector<size_t> params;  // indices into the trainable parameters, registration order
};

/// The units of `model`, in the order backward completes them: wrapped modules by their first
/// parameter's registration index, latest first, then the root (the model: every parameter no
/// wrapped module holds, and a parameter two units share). Units without parameters are left out.
std::vector<UnitModule> select_units(torch::nn::Module& model, const std::vector<NamedTensor>& params,
                                     const ResolvedFsdpPlugin& plugin);

}  // namespace acc::detail
