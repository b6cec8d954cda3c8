#pragma once
// Device maps for big-model inference (Accelerate's utils/modeling.py): where each module's
// weights live (a GPU, the CPU, or disk), computed from the module tree, the devices' memory and the
// classes that must not be split, or written by hand.
#include <torch/arg.h>
#include <torch/nn/module.h>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace acc {

/// Module name ("" is the whole model) -> "cuda:N", "cpu" or "disk", in module order. Accelerate's
/// `hf_device_map`: a module's entry covers its submodules, parameters and buffers unless a longer
/// name overrides it.
class DeviceMap {
 public:
  using Entry = std::pair<std::string, std::string>;

  DeviceMap() = default;
  /// Devices are normalised: 0 or "0" -> "cuda:0", "cuda" -> "cuda:0". ConfigError on anything but
  /// cuda:N, cpu, disk (and meta, which leaves a module empty).
  DeviceMap(std::initializer_list<Entry> entries);

  /// Sets (or replaces) `module`'s device.
  void set(const std::string& module, const std::string& device);
  const std::vector<Entry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

  /// The device of the longest entry that is `name` or a dot-separated prefix of it (a module,
  /// parameter or buffer name); nullopt when no entry covers it.
  std::optional<std::string> device_of(const std::string& name) const;
  /// That entry's index in entries(); nullopt when no entry covers `name`.
  std::optional<size_t> entry_of(const std::string& name) const;
  /// The distinct devices, in order of first appearance.
  std::vector<std::string> devices() const;

  /// Accelerate's JSON: {"module": 0 | "cpu" | "disk"} (GPU indices as integers), in map order.
  std::string to_json() const;
  /// Reads to_json()'s form and Python's hf_device_map JSON (integers, "cuda:N", "cpu", "disk").
  /// ConfigError naming `source` and the entry.
  static DeviceMap from_json(const std::string& text, const std::string& source = "device map");

  bool operator==(const DeviceMap& other) const { return entries_ == other.entries_; }

 private:
  std::vector<Entry> entries_;
};

/// One line per entry: `module -> device` (the whole model's entry prints as `""`).
std::ostream& operator<<(std::ostream& out, const DeviceMap& map);

/// Bytes each device may hold, in device order ("cuda:0", "cuda:1", ..., "cpu", "disk").
using MaxMemory = std::vector<std::pair<std::string, uint64_t>>;

/// Parses {"0": "10GiB", "cpu": "30GB"}-style limits: sizes as parse_shard_size ("10GB" = 10^9,
/// "10GiB" = 2^30, plain bytes; 0 is allowed), devices normalised as in DeviceMap and sorted GPUs,
/// cpu, disk. ConfigError naming the device for a bad device, a bad size or a device given twice.
MaxMemory parse_max_memory(const std::vector<std::pair<std::string, std::string>>& limits);

/// Accelerate's get_max_memory: `limits` when given, else every visible GPU's free memory and the
/// CPU's available memory (MemAvailable).
MaxMemory get_max_memory(const MaxMemory& limits = {});

/// Bytes of each module's parameters and buffers, itself and its submodules, by name ("" the root),
/// counted once per tensor; floating-point tensors counted at `dtype` when given (Accelerate's
/// compute_module_sizes). Names in Accelerate's order: every prefix of each parameter's name, then
/// of each buffer's. A bool element counts 1/8 byte, as in Accelerate; sizes are rounded up to
/// whole bytes.
std::vector<std::pair<std::string, uint64_t>> compute_module_sizes(
    const torch::nn::Module& model, std::optional<c10::ScalarType> dtype = std::nullopt);

/// Groups of parameter names that are one tensor (tied weights), each group in name order.
std::vector<std::vector<std::string>> find_tied_parameters(const torch::nn::Module& model);

struct AutoDeviceMapOptions {
  /// Empty: get_max_memory().
  TORCH_ARG(MaxMemory, max_memory);
  /// Module types never split across devices: Module::name() with or without the namespace and the
  /// "Impl" suffix of TORCH_MODULE types ("Block" matches "BlockImpl" and "ns::BlockImpl").
  TORCH_ARG(std::vector<std::string>, no_split_module_classes);
  /// Size floating-point weights as this dtype (the dtype they will be loaded in).
  TORCH_ARG(std::optional<c10::ScalarType>, dtype);
  /// Merge entries whose submodules all went to one device into their parent.
  TORCH_ARG(bool, clean_result) = true;
  /// Count buffers of offloaded modules as offloaded too (they stay on the execution device
  /// otherwise, so they count against it). As in Accelerate, the map is the same either way: without
  /// it, a warning says when the offloaded modules' buffers fit on no GPU beside what it holds.
  TORCH_ARG(bool, offload_buffers) = false;
  /// Print each decision (to stdout, as Accelerate's verbose=True).
  TORCH_ARG(bool, verbose) = false;
};

/// Accelerate's infer_auto_device_map: modules in order fill each GPU, then the CPU, then disk;
/// a module that does not fit is split into its children unless its type is in
/// no_split_module_classes; tied parameters stay on one device; each GPU keeps room for the largest
/// unsplittable layer.
DeviceMap infer_auto_device_map(const torch::nn::Module& model,
                                const AutoDeviceMapOptions& options = {});

/// Accelerate's get_balanced_memory: per-GPU limits that spread the model evenly over the GPUs
/// (`low_zero`: keep GPU 0 as free as possible, "balanced_low_0"). Limits without GPUs are returned
/// unchanged.
MaxMemory get_balanced_memory(const torch::nn::Module& model, const AutoDeviceMapOptions& options,
                              bool low_zero = false);

/// What load_checkpoint_and_dispatch and dispatch_model accept: "auto", "balanced",
/// "balanced_low_0" or "sequential" (computed with infer_auto_device_map), a single device
/// ("cpu", "cuda:0", "disk") for the whole model, or a DeviceMap (its JSON, "{...}").
DeviceMap resolve_device_map(const torch::nn::Module& model, const std::string& device_map,
                             const AutoDeviceMapOptions& options = {});

}  // namespace acc
