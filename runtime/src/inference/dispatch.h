#pragma once
// What load_checkpoint_and_dispatch and dispatch_model share: each weight's place, and the hooks
// that bring offloaded weights (and inputs) to a module's execution device around its forward.
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <string>
#include <vector>

#include <acc/big_modeling.h>

#include "inference/disk_weights.h"

namespace acc::detail {

/// One parameter or buffer of the model (tied names counted once) and where the map put it.
struct PlacedTensor {
  std::string name;
  at::Tensor tensor;      // the model's own (its TensorImpl); set_data moves it
  std::string placement;  // "cuda:N", "cpu" or "disk"
  bool buffer = false;
  DiskWeight disk;        // placement "disk": its bytes
};

/// Makes the model's tensor `tensor` (its TensorImpl, which the module and the user hold) show
/// `value`: set_data, except between meta and a real device, which set_data refuses (its check is
/// for training, where the gradient accumulator would go stale; dispatched models run inference).
void replace_data(const at::Tensor& tensor, const at::Tensor& value);

/// The model's parameters and buffers in state order, each TensorImpl once (tied weights under
/// their first name).
std::vector<std::pair<std::string, at::Tensor>> unique_tensors(const torch::nn::Module& model,
                                                               std::vector<bool>* is_buffer);

/// ConfigError when an entry names neither a module nor a tensor of `model`, or a tensor is in no
/// entry.
void check_device_map(const torch::nn::Module& model, const DeviceMap& map);

/// ConfigError, before anything changes, when a module that keeps its weights off a GPU execution
/// device is a built-in one that no Sequential calls: its hooks could never bring them in.
void check_hooks_can_run(torch::nn::Module& model, const DeviceMap& map, const DispatchOptions& options);

/// The execution device of "cpu"/"disk" modules: options.execution_device, else the map's first
/// GPU, else the CPU.
c10::Device main_device(const DeviceMap& map, const DispatchOptions& options);

/// The first step of a dispatch, before anything changes: check_device_map and
/// check_hooks_can_run, then each of unique_tensors placed where the map puts it, except the
/// buffers of "cpu"/"disk" entries, which stay on the execution device unless offload_buffers
/// (Accelerate's default). `disk` is left for the caller.
std::vector<PlacedTensor> plan_dispatch(torch::nn::Module& model, const DeviceMap& map, const DispatchOptions& options);

/// With every "cuda:N"/"cpu" tensor already holding its data there (or, for "cpu" weights of
/// modules that run elsewhere, on the CPU) and "disk" tensors described by `disk`: sets the rest
/// state of offloaded weights and hooks the modules that need it. Replaces an earlier dispatch.
DispatchReport attach_dispatch(torch::nn::Module& model, const DeviceMap& map,
                               std::vector<PlacedTensor> placed, const DispatchOptions& options);

}  // namespace acc::detail
