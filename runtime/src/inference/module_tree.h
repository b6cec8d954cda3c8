#pragma once
// The core of device maps (Accelerate's utils/modeling.py) over a plain module tree, without
// torch: what infer_auto_device_map, get_balanced_memory, compute_module_sizes and
// find_tied_parameters see of a model is its modules' types, their own parameters and buffers
// (shapes and dtypes, never data, so meta tensors do), their children, and which names are one
// tensor. auto_device_map.cpp builds the tree from a torch::nn::Module and implements both.
//
// Sizes are counted in bits: Accelerate counts a bool element as 1/8 byte (a float in Python), and
// bits keep that exact.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace c10 {
enum class ScalarType : int8_t;
}
namespace torch::nn {
class Module;
}

namespace acc::detail {

struct TreeTensor {
  std::string name;  // as registered in its module
  uint64_t numel = 0;
  uint64_t element_bits = 0;  // Accelerate's dtype_byte_size, in bits (bool: 1)
  bool converts = false;      // loaded in the requested dtype: anything but int*, uint*, bool
  size_t id = 0;              // identity: one id under two names is one tensor (tied weights)
};

struct TreeModule {
  std::string type;                    // Module::name(): matched by module_type_matches against no-split classes
  std::vector<TreeTensor> parameters;  // own, registration order
  std::vector<TreeTensor> buffers;     // own, registration order
  std::vector<std::pair<std::string, size_t>> children;  // registration order; index into ModuleTree::modules
};

/// modules[0] is the root. A module registered at two places is one entry reached twice (a shared
/// module); Python's named_modules() and named_children() list it once, and so does the core.
struct ModuleTree {
  std::vector<TreeModule> modules;
};

/// The tree of `model`: named_children() order, own parameters then buffers in registration order,
/// tensors identified by their TensorImpl, undefined tensors left out (Python's None).
ModuleTree module_tree(const torch::nn::Module& model);
/// Accelerate's dtype_byte_size in bits: 1 for bool, 8 for the float8 types, the width in the
/// dtype's Python name otherwise, rounded down to whole bytes (0 for uint1..7, int1..7, the 4-bit
/// packed types).
uint64_t element_bits(c10::ScalarType dtype);
/// Whether Accelerate converts a tensor of `dtype` to the requested dtype (and counts it at the
/// smaller of the two sizes): every dtype whose Python name does not start with int, uint or bool.
bool converts_to_requested_dtype(c10::ScalarType dtype);

/// name -> bits, in first-insertion order (Python's dict). Names it does not hold read as 0, as
/// Accelerate's defaultdict does.
class SizeTable {
 public:
  void add(const std::string& name, uint64_t bits);
  uint64_t at(const std::string& name) const;
  bool contains(const std::string& name) const;
  const std::vector<std::pair<std::string, uint64_t>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, uint64_t>> items_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in items_
};

/// Accelerate's compute_module_sizes of the subtree at `root` (names relative to it, "" itself):
/// each tensor counted once (the first name in named_modules() order), parameters then buffers;
/// with `dtype_bits`, tensors that convert count at min(dtype, own) bits.
SizeTable tree_module_sizes(const ModuleTree& tree, std::optional<uint64_t> dtype_bits, size_t root = 0,
                            bool buffers_only = false);

/// Accelerate's find_tied_parameters: for each tensor registered under more than one name, all its
/// names, sorted; groups in the order of their first name in named_parameters().
std::vector<std::vector<std::string>> tree_tied_parameters(const ModuleTree& tree);

/// A device map as the core builds it: (module, device) in order.
using DeviceEntries = std::vector<std::pair<std::string, std::string>>;
/// Bytes per device, the devices normalised ("cuda:N", "cpu", "disk") and in device order.
using DeviceBytes = std::vector<std::pair<std::string, uint64_t>>;

struct PlacementOptions {
  DeviceBytes max_memory;  // resolved: normalised, GPUs by index, then cpu, then disk
  std::vector<std::string> no_split_module_classes;
  std::optional<uint64_t> dtype_bits;
  bool clean_result = true;
  bool offload_buffers = false;
  std::ostream* verbose = nullptr;  // each decision, as Accelerate's verbose=True prints them
};

/// Accelerate's infer_auto_device_map (fallback_allocation=False).
DeviceEntries tree_infer_device_map(const ModuleTree& tree, const PlacementOptions& options);

/// Accelerate's clean_device_map: entries under a module that all went to one device become one
/// entry for the module, at the place of the first of them (Python appends it at the end, after a
/// walk over a set: its order is not reproducible).
void clean_device_map(DeviceEntries& entries, const std::string& module_name = "");

/// Accelerate's get_balanced_memory over resolved limits; `user_set`: the limits came from the
/// caller (when they were detected, a single GPU keeps 10% free).
DeviceBytes tree_balanced_memory(const ModuleTree& tree, DeviceBytes max_memory, bool user_set,
                                 const std::vector<std::string>& no_split_module_classes,
                                 std::optional<uint64_t> dtype_bits, bool low_zero);

// Device names, shared by DeviceMap and the core.

/// "cuda:N" for 0, "0", "cuda", "cuda:N"; "cpu", "disk", "meta" as they are; nullopt otherwise.
std::optional<std::string> normalise_device(const std::string& device);
/// The N of "cuda:N" (normalised), or -1.
int gpu_index(const std::string& device);
/// Device order: GPUs by index, then cpu, then disk, then meta.
bool device_before(const std::string& a, const std::string& b);

}  // namespace acc::detail
