#pragma once
// A model built empty (acc::init_empty_weights: meta tensors) on ranks other than 0 gets rank 0's
// weights at prepare (sync_module_states, FSDP's cpu_ram_efficient_loading): its meta tensors are
// found here and given memory to receive them, keeping their TensorImpls (the module, the
// optimizer and the user hold those).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

#include <string>

namespace acc::detail {

/// The name of the first parameter or buffer of `model` that is a meta tensor; "" when none is.
std::string first_meta_tensor(const torch::nn::Module& model);

/// Makes `tensor` show `value` (same shape and dtype), also when `tensor` is a meta tensor, which
/// set_data refuses. Its gradient accumulator, which would describe a meta tensor, must not exist
/// yet (nothing ran backward on an empty model); Error otherwise.
void materialize(const at::Tensor& tensor, const at::Tensor& value);

/// Gives every meta parameter and buffer of `model` uninitialised memory on `device`, except
/// parameters that require grad when `trainable` is false (FSDP fills those unit by unit).
void materialize_meta_tensors(torch::nn::Module& model, c10::Device device, bool trainable);

/// Moves the tensors of `model` that have data to `device` (Module::to refuses meta tensors).
void move_tensors_with_data(torch::nn::Module& model, c10::Device device);

}  // namespace acc::detail
