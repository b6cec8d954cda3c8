#pragma once
// Big-model inference (Accelerate's big_modeling.py): build a model without allocating its weights,
// then load a checkpoint into it shard by shard with each module's weights where a device map says
// (a GPU, the CPU, or disk), and run it: weights kept off the execution device are brought in
// around their module's forward through the forward seam (<acc/hooks.h>). See docs/big_model.md.
//
//     Net net = nullptr;
//     {
//       acc::init_empty_weights empty;
//       net = Net(config);  // no weight memory, no initialisation kernels
//     }
//     acc::load_checkpoint_and_dispatch(net, "checkpoints/net", "auto",
//                                       acc::DispatchOptions().max_memory({{"cpu", "2GB"}}));
#include <torch/arg.h>
#include <torch/nn/module.h>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <acc/checkpoint_model.h>
#include <acc/device_map.h>

namespace acc {

/// Tensors created on this thread while the guard lives are meta tensors: shapes, dtypes and names
/// as usual, no memory, and initialisation kernels do nothing. Every libtorch module works
/// unchanged: factory functions (torch::empty, torch::ones, ...) are sent to the Meta backend by
/// the dispatcher, and in-place initialisers run on meta tensors.
///
/// Buffers are empty too (`include_buffers` is true, unlike Accelerate's default): libtorch
/// registers buffers and parameters alike through non-virtual calls after the tensor exists, so
/// nothing can tell them apart when they are created; every libtorch buffer is in the state dict,
/// so loading a checkpoint fills them. Build a module whose buffers you need computed (positional
/// tables) inside `acc::init_on_device inner(torch::kCPU);`. Tensors that existed before the guard
/// keep their data, but operations on them inside it return meta tensors.
class init_on_device {
 public:
  /// kMeta: as init_empty_weights. kCPU: ordinary construction (undoes an enclosing
  /// init_empty_weights). Other devices: ConfigError (libtorch has no default device to redirect;
  /// build empty and let dispatch_model or load_checkpoint_and_dispatch place the weights).
  explicit init_on_device(c10::Device device);
  ~init_on_device();
  init_on_device(const init_on_device&) = delete;
  init_on_device& operator=(const init_on_device&) = delete;

 protected:
  init_on_device(c10::Device device, bool enabled);

 private:
  uint64_t saved_included_ = 0;
  uint64_t saved_excluded_ = 0;
};

class init_empty_weights : public init_on_device {
 public:
  init_empty_weights() : init_on_device(c10::Device(c10::kMeta)) {}
  /// Empty construction only when `enabled`; otherwise the guard changes nothing. For FSDP's
  /// cpu_ram_efficient_loading, where every process but the main one builds the model empty and
  /// prepare() gives it the main process's weights (docs/fsdp.md):
  ///
  ///     acc::init_empty_weights empty(accelerator.cpu_ram_efficient_loading() &&
  ///                                   !accelerator.is_main_process());
  explicit init_empty_weights(bool enabled) : init_on_device(c10::Device(c10::kMeta), enabled) {}
};

/// Whether any parameter or buffer of `module` is a meta tensor (built empty, not loaded yet).
bool has_meta_tensors(const torch::nn::Module& module);

struct DispatchOptions {
  /// For "auto", "balanced", "balanced_low_0", "sequential": the limits (empty: what the devices
  /// have), the types never split, and whether buffers of offloaded modules are offloaded too.
  TORCH_ARG(MaxMemory, max_memory);
  TORCH_ARG(std::vector<std::string>, no_split_module_classes);
  TORCH_ARG(bool, offload_buffers) = false;
  /// Where weights mapped to "disk" are written when they cannot be read from the checkpoint as
  /// they are (a dtype conversion, a .bin checkpoint, or dispatch_model of a loaded model).
  TORCH_ARG(std::string, offload_folder);
  /// Floating-point weights are converted to this dtype as they are loaded.
  TORCH_ARG(std::optional<c10::ScalarType>, dtype);
  /// Where modules whose weights are on "cpu" or "disk" run: the first GPU of the map, else the
  /// CPU (Accelerate's main device), unless set.
  TORCH_ARG(std::optional<c10::Device>, execution_device);
  /// Move the model's output back to the device of its input (when the root is a Sequential, whose
  /// last child acc calls).
  TORCH_ARG(bool, io_same_device) = true;
};

/// What a dispatch decided, to print or test.
struct DispatchReport {
  DeviceMap device_map;
  /// Each map entry (in device_map's order, so device_map.entry_of(name) indexes it) -> where it runs.
  std::vector<std::pair<std::string, std::string>> execution_devices;
  /// Bytes of weights on each device ("cuda:0", "cpu", "disk").
  std::vector<std::pair<std::string, uint64_t>> bytes_per_device;
};

/// Accelerate's load_checkpoint_and_dispatch. `checkpoint`: a .safetensors file, a
/// model.safetensors.index.json (save_model's or Python's sharded layout), a directory holding
/// either, or an acc save_state directory (its model.safetensors). `device_map`: "auto",
/// "balanced", "balanced_low_0", "sequential", a single device ("cpu", "cuda:0", "disk"), or a map
/// (DeviceMap converts from {{"layers.0", "cpu"}, ...}). The model may be empty
/// (init_empty_weights) or loaded. Shards are read one at a time; "disk" weights stay in the
/// checkpoint's file (memory-mapped) unless they need converting. A weight the checkpoint lacks,
/// a shape that differs, a map entry that names no module, or a weight no entry covers is a
/// CheckpointError/ConfigError that names it, and nothing is loaded.
DispatchReport load_checkpoint_and_dispatch(torch::nn::Module& model, const std::string& checkpoint,
                                            const DeviceMap& device_map,
                                            const DispatchOptions& options = {});
DispatchReport load_checkpoint_and_dispatch(torch::nn::Module& model, const std::string& checkpoint,
                                            const std::string& device_map = "auto",
                                            const DispatchOptions& options = {});

/// Accelerate's dispatch_model for a model whose weights are loaded: moves each module's weights
/// where the map says ("disk" weights are written to options.offload_folder and mapped) and hooks
/// modules whose weights are off their execution device.
DispatchReport dispatch_model(torch::nn::Module& model, const DeviceMap& device_map,
                              const DispatchOptions& options = {});

/// All weights on the CPU, each module's brought to `execution_device` around its forward.
DispatchReport cpu_offload(torch::nn::Module& model, c10::Device execution_device);
/// All weights written to `folder` and memory-mapped, paged in around each module's forward on
/// `execution_device`.
DispatchReport disk_offload(torch::nn::Module& model, const std::string& folder,
                            c10::Device execution_device = c10::Device(c10::kCPU));

/// Removes the hooks dispatch attached; every weight is left resident where it executes ("disk"
/// weights mapped from their file, "cpu" ones on the CPU).
void remove_hooks(torch::nn::Module& model);

/// Overloads for shared_ptr<Net>, TORCH_MODULE holders and pointers.
template <typename Model, typename = std::enable_if_t<!std::is_base_of_v<torch::nn::Module, Model>>>
DispatchReport load_checkpoint_and_dispatch(Model& model, const std::string& checkpoint,
                                            const std::string& device_map = "auto",
                                            const DispatchOptions& options = {}) {
  return load_checkpoint_and_dispatch(detail::module_ref(model), checkpoint, device_map, options);
}
template <typename Model, typename = std::enable_if_t<!std::is_base_of_v<torch::nn::Module, Model>>>
DispatchReport load_checkpoint_and_dispatch(Model& model, const std::string& checkpoint,
                                            const DeviceMap& device_map,
                                            const DispatchOptions& options = {}) {
  return load_checkpoint_and_dispatch(detail::module_ref(model), checkpoint, device_map, options);
}
template <typename Model, typename = std::enable_if_t<!std::is_base_of_v<torch::nn::Module, Model>>>
DispatchReport dispatch_model(Model& model, const DeviceMap& device_map,
                              const DispatchOptions& options = {}) {
  return dispatch_model(detail::module_ref(model), device_map, options);
}
template <typename Model, typename = std::enable_if_t<!std::is_base_of_v<torch::nn::Module, Model>>>
DispatchReport cpu_offload(Model& model, c10::Device execution_device) {
  return cpu_offload(detail::module_ref(model), execution_device);
}
template <typename Model, typename = std::enable_if_t<!std::is_base_of_v<torch::nn::Module, Model>>>
DispatchReport disk_offload(Model& model, const std::string& folder,
                            c10::Device execution_device = c10::Device(c10::kCPU)) {
  return disk_offload(detail::module_ref(model), folder, execution_device);
}
template <typename Model, typename = std::enable_if_t<!std::is_base_of_v<torch::nn::Module, Model>>>
void remove_hooks(Model& model) {
  remove_hooks(detail::module_ref(model));
}

}  // namespace acc
