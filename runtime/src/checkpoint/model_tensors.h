#pragma once
// Model weights as named tensors, for the checkpoint formats that do not go through a weights
// file of their own (Accelerate's save_state layout, where the names carry DDP's "module." prefix
// and the file may be a Python pickle).
#include <torch/nn/module.h>

#include <map>
#include <string>

#include <acc/checkpoint_model.h>

namespace acc::detail {

/// save_model_file with `prefix` before every name (tied weights once, under the first name).
void save_model_file_with_prefix(const torch::nn::Module& module, const std::string& path, const std::string& prefix);

/// load_checkpoint_in_model's matching and copying, for tensors already read from `source` (named
/// in its errors).
LoadReport load_named_tensors(torch::nn::Module& module, std::map<std::string, at::Tensor> checkpoint,
                              const std::string& source, bool strict);

}  // namespace acc::detail
