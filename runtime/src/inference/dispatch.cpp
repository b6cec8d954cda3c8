// Dispatch: every weight where the device map says, and hooks on the forward seam for modules
// whose weights are kept off their execution device (Accelerate's AlignDevicesHook).
//
// A module's hooks run only where acc sees its calls: as a Sequential's child, or through the
// guard line in its forward. Correctness must not depend on that, so an offloaded module's weights
// rest where its forward can still use them unless acc knows the hooks will run: "disk" weights
// stay mapped from their file (the page cache holds them, not RssAnon) and are released to empty
// meta tensors only once the module's own hooks have run; "cpu" weights rest on the CPU. Only a GPU
// execution device needs the hooks, and there a built-in module no Sequential calls is an error.
#include "inference/dispatch.h"

#include <ATen/ops/empty.h>
#include <c10/util/irange.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <acc/checkpoint_model.h>
#include <acc/errors.h>
#include <acc/hooks.h>
#include <acc/testing.h>

namespace acc {
namespace detail {
namespace {

bool is_container(const torch::nn::Module& module) {
  return dynamic_cast<const torch::nn::SequentialImpl*>(&module) != nullptr ||
         dynamic_cast<const torch::nn::ModuleListImpl*>(&module) != nullptr ||
         dynamic_cast<const torch::nn::ModuleDictImpl*>(&module) != nullptr;
}

bool is_builtin(const torch::nn::Module& module) { return module.name().rfind("torch::nn::", 0) == 0; }

at::Tensor empty_like_meta(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(), tensor.options().device(c10::kMeta));
}

uint64_t tensor_bytes(const at::Tensor& tensor) {
  return static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
}

// A weight that rests away from where its module runs.
struct OffloadedWeight {
  at::Tensor tensor;
  bool disk = false;
  DiskWeight bytes;      // disk: where it is read from
  at::Tensor empty;      // disk: its empty (meta) resting form, made once
  at::Tensor cpu_value;  // cpu: the CPU tensor copied in
  c10::Device home = c10::Device(c10::kCPU);  // where its own entry runs
};

// One hooked module: the weights it brings in around its forward.
struct HookedModule {
  c10::Device execution = c10::Device(c10::kCPU);
  bool move_inputs = false;
  std::vector<OffloadedWeight> weights;

  void bring_in(ForwardArgs& args) {
    torch::NoGradGuard no_grad;
    const bool copy = testing::forced_on_cpu().offload_copies;
    try {
      for (auto& weight : weights) {
        replace_data(weight.tensor, weight.disk ? map_weight(weight.bytes).to(execution)
                                                : weight.cpu_value.to(execution, /*non_blocking=*/false, copy));
      }
    } catch (...) {  // the forward hook will not run: do not leave weights on the device
      release();
      throw;
    }
    if (move_inputs) {
      for (auto* input : args.inputs) {
        if (input->defined() && input->device() != execution) *input = input->to(execution);
      }
    }
  }

  void release() {
    torch::NoGradGuard no_grad;
    for (auto& weight : weights) replace_data(weight.tensor, weight.disk ? weight.empty : weight.cpu_value);
  }

  // Resident where the forward can use it without hooks (before they are known to run, and after
  // remove_hooks).
  void make_resident() {
    torch::NoGradGuard no_grad;
    for (auto& weight : weights) {
      replace_data(weight.tensor, weight.disk ? map_weight(weight.bytes) : weight.cpu_value);
    }
  }
};

struct DispatchRecord {
  std::weak_ptr<torch::nn::Module> owner;
  bool owned = false;
  std::vector<HookHandle> handles;
  std::vector<std::shared_ptr<HookedModule>> hooked;
};

struct Dispatches {
  std::mutex mutex;
  std::unordered_map<const torch::nn::Module*, DispatchRecord> records;
};

Dispatches& dispatches() {
  static auto* instance = new Dispatches;
  return *instance;
}

// Takes the record of `model` out of the registry (none, or a destroyed model's: empty), and
// drops the records of every other destroyed model with it, so that their offloaded weights go.
DispatchRecord take_record(const torch::nn::Module& model) {
  auto& all = dispatches();
  std::vector<DispatchRecord> dead;
  DispatchRecord record;
  {
    std::lock_guard<std::mutex> lock(all.mutex);
    for (auto it = all.records.begin(); it != all.records.end();) {
      const bool gone = it->second.owned && it->second.owner.expired();
      if (it->first == &model || gone) {
        (gone ? dead.emplace_back() : record) = std::move(it->second);
        it = all.records.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& record_of_dead : dead) {
    for (auto& handle : record_of_dead.handles) handle.remove();
  }
  return record;
}

// The modules whose hooks will carry an entry's weights: the entry itself, or the children of
// containers (never called as such, or calling their children through AnyModule) and of the root
// (whose forward the user calls; Accelerate hooks every submodule there too).
void hook_targets(torch::nn::Module& module, const std::string& name,
                  std::vector<std::pair<std::string, torch::nn::Module*>>& out) {
  const bool descend = is_container(module) || name.empty();
  if (!descend || module.children().empty()) {
    out.emplace_back(name, &module);
    return;
  }
  for (const auto& child : module.named_children()) {
    hook_targets(*child.value(), name.empty() ? child.key() : name + "." + child.key(), out);
  }
}

}  // namespace

void replace_data(const at::Tensor& tensor, const at::Tensor& value) {
  if (tensor.is_meta() == value.is_meta()) {
    tensor.set_data(value);
    return;
  }
  tensor.unsafeGetTensorImpl()->shallow_copy_from(value.getIntrusivePtr());
}

std::vector<std::pair<std::string, at::Tensor>> unique_tensors(const torch::nn::Module& model,
                                                               std::vector<bool>* is_buffer) {
  std::unordered_set<const void*> buffers;
  for (const auto& buffer : model.buffers()) buffers.insert(buffer.unsafeGetTensorImpl());
  std::unordered_set<const void*> seen;
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& [name, tensor] : model_state(model)) {
    if (!seen.insert(tensor.unsafeGetTensorImpl()).second) continue;
    if (is_buffer != nullptr) is_buffer->push_back(buffers.count(tensor.unsafeGetTensorImpl()) != 0);
    out.emplace_back(name, tensor);
  }
  return out;
}

void check_device_map(const torch::nn::Module& model, const DeviceMap& map) {
  if (map.empty()) {
    throw ConfigError("acc: the device map is empty; give every module a device, e.g. {{\"\", \"cpu\"}}");
  }
  std::set<std::string> known;
  for (const auto& item : model.named_modules()) known.insert(item.key());
  for (const auto& [name, tensor] : model_state(model)) known.insert(name);
  for (const auto& [name, device] : map.entries()) {
    if (known.count(name) == 0) {
      throw ConfigError("acc: the device map names '" + name + "', which is neither a module nor a "
                        "weight of the model; use the names of named_modules() (\"\" for the whole "
                        "model)");
    }
  }
  for (const auto& [name, tensor] : unique_tensors(model, nullptr)) {
    if (!map.entry_of(name)) {
      throw ConfigError("acc: the device map puts the weight '" + name + "' nowhere; add an entry "
                        "for it or one of its modules (\"\" covers the whole model)");
    }
  }
}

c10::Device main_device(const DeviceMap& map, const DispatchOptions& options) {
  if (options.execution_device()) return *options.execution_device();
  for (const auto& device : map.devices()) {
    if (device != "cpu" && device != "disk" && device != "meta") return c10::Device(device);
  }
  return c10::Device(c10::kCPU);
}

namespace {

c10::Device execution_of(const std::string& device, c10::Device main) {
  return device == "cpu" || device == "disk" ? main : c10::Device(device);
}

std::unordered_map<const torch::nn::Module*, torch::nn::Module*> parents(torch::nn::Module& model) {
  std::unordered_map<const torch::nn::Module*, torch::nn::Module*> parent_of;
  for (const auto& item : model.named_modules()) {
    for (const auto& child : item.value()->children()) parent_of[child.get()] = item.value().get();
  }
  return parent_of;
}

torch::nn::SequentialImpl* sequential_parent(
    const std::unordered_map<const torch::nn::Module*, torch::nn::Module*>& parent_of,
    const torch::nn::Module* module) {
  auto it = parent_of.find(module);
  return it == parent_of.end() ? nullptr : dynamic_cast<torch::nn::SequentialImpl*>(it->second);
}

}  // namespace

void check_hooks_can_run(torch::nn::Module& model, const DeviceMap& map, const DispatchOptions& options) {
  const c10::Device main = main_device(map, options);
  if (main.is_cpu()) return;  // hooks only make things strict there; without them the forward works
  const auto parent_of = parents(model);
  for (const auto& [entry_name, device] : map.entries()) {
    if ((device != "cpu" && device != "disk") || execution_of(device, main).is_cpu()) continue;
    std::shared_ptr<torch::nn::Module> module;
    for (const auto& item : model.named_modules()) {
      if (item.key() == entry_name) module = item.value();
    }
    if (!module) continue;  // a weight's own entry: it rests where it runs
    std::vector<std::pair<std::string, torch::nn::Module*>> targets;
    hook_targets(*module, entry_name, targets);
    for (const auto& [target_name, target] : targets) {
      if (sequential_parent(parent_of, target) != nullptr || !is_builtin(*target) ||
          target->parameters().empty()) {
        continue;
      }
      throw ConfigError(
          "acc: '" + target_name + "' (" + target->name() + ") keeps its weights on " + device +
          " and runs on " + main.str() + ", which needs hooks around its forward, but acc only sees "
          "the calls of Sequential children and of modules whose forward opens "
          "acc::ForwardHooksGuard; put it on " + main.str() + " in the device map, make its parent "
          "module the entry (with the guard line in the parent's forward), or call it through a "
          "torch::nn::Sequential");
    }
  }
}

std::vector<PlacedTensor> plan_dispatch(torch::nn::Module& model, const DeviceMap& map, const DispatchOptions& options) {
  check_device_map(model, map);
  check_hooks_can_run(model, map, options);
  const c10::Device main = main_device(map, options);
  std::vector<bool> is_buffer;
  const auto tensors = unique_tensors(model, &is_buffer);
  std::vector<PlacedTensor> placed(tensors.size());
  for (const auto i : c10::irange(tensors.size())) {
    auto& out = placed[i];
    out.name = tensors[i].first;
    out.tensor = tensors[i].second;
    out.buffer = is_buffer[i];
    out.placement = *map.device_of(out.name);
    if (out.buffer && !options.offload_buffers() && (out.placement == "disk" || out.placement == "cpu")) {
      out.placement = main.str();  // buffers stay where their module runs (Accelerate's default)
    }
  }
  return placed;
}

namespace {

// One attach_dispatch: the weights that rest away from where their module runs, the hooks that
// carry them, and the bytes each device ends up holding.
class Attachment {
 public:
  Attachment(torch::nn::Module& model, const DeviceMap& map, const DispatchOptions& options)
      : model_(model), map_(map), main_(main_device(map, options)), parent_of_(parents(model)) {
    for (const auto& item : model.named_modules()) modules_.emplace(item.key(), item.value().get());
    report_.device_map = map;
    std::set<std::string> execution_devices;
    for (const auto& [name, device] : map.entries()) {
      report_.execution_devices.emplace_back(name, execution_of(device, main_).str());
      execution_devices.insert(execution_of(device, main_).str());
    }
    // Inputs move where a module runs when that is not where every input already is: several
    // execution devices, or a GPU (inputs usually arrive on the CPU).
    move_io_ = execution_devices.size() > 1 || *execution_devices.begin() != "cpu";
    record_.owner = model.weak_from_this();
    record_.owned = !record_.owner.expired();
  }

  // The weights that rest away from where their module runs, by TensorImpl: every hooked module
  // that holds one carries it (a tied weight may be used by modules of several entries).
  void find_offloaded(const std::vector<PlacedTensor>& placed) {
    const bool copies = testing::forced_on_cpu().offload_copies;
    for (const auto& tensor : placed) {
      const size_t entry = *map_.entry_of(tensor.name);
      const bool module_entry = modules_.count(map_.entries()[entry].first) != 0;
      const bool off = tensor.placement == "disk" ||
                       (tensor.placement == "cpu" && (!execution_of("cpu", main_).is_cpu() || copies));
      if (off && module_entry) {
        OffloadedWeight weight;
        weight.tensor = tensor.tensor;
        weight.home = execution_of(map_.entries()[entry].second, main_);
        weight.disk = tensor.placement == "disk";
        if (weight.disk) {
          weight.bytes = tensor.disk;
          weight.empty = empty_like_meta(tensor.tensor);
        } else {
          weight.cpu_value = tensor.tensor.data();
        }
        offloaded_.emplace(tensor.tensor.unsafeGetTensorImpl(), std::move(weight));
      } else if (off) {
        resident_now_.push_back(&tensor);
      }
      bytes_[tensor.placement] += tensor.placement == "disk" ? tensor.disk.bytes : tensor_bytes(tensor.tensor);
    }
  }

  // Output back to the input's device when acc calls the root's last child. Registered before the
  // modules' hooks, so that the input's device is read before a module's own hook moves the input.
  void hook_output_to_input_device() {
    auto* root = dynamic_cast<torch::nn::SequentialImpl*>(&model_);
    if (!move_io_ || root == nullptr || root->size() == 0) return;
    auto input_device = std::make_shared<std::optional<c10::Device>>();
    record_.handles.push_back(register_forward_pre_hook(
        *root->children().front(), [input_device](torch::nn::Module&, ForwardArgs& args) {
          if (!args.inputs.empty() && args.inputs.front()->defined()) {
            *input_device = args.inputs.front()->device();
          }
        }));
    record_.handles.push_back(register_forward_hook(
        *root->children().back(), [input_device](torch::nn::Module&, ForwardArgs& args) {
          if (args.output != nullptr && *input_device && args.output->defined() &&
              args.output->device() != **input_device) {
            *args.output = args.output->to(**input_device);
          }
        }));
    sequentials_.insert(root);
  }

  void hook_entries() {
    for (const auto& [entry_name, device] : map_.entries()) {
      auto module_it = modules_.find(entry_name);
      if (module_it == modules_.end()) continue;
      std::vector<std::pair<std::string, torch::nn::Module*>> targets;
      hook_targets(*module_it->second, entry_name, targets);
      for (const auto& target : targets) hook(*target.second, execution_of(device, main_));
    }
  }

  // Offloaded weights no hook carries (a weight's own entry, a container's or the root's own
  // weights) rest where they run, and count there.
  void rest_uncarried() {
    for (const auto* tensor : resident_now_) {
      const bool disk = tensor->placement == "disk";
      rest_where_run(tensor->tensor, disk ? map_weight(tensor->disk) : tensor->tensor, tensor->placement,
                     disk ? tensor->disk.bytes : tensor_bytes(tensor->tensor),
                     execution_of(map_.entries()[*map_.entry_of(tensor->name)].second, main_));
    }
    for (auto& [impl, weight] : offloaded_) {
      if (carried_.count(impl) != 0) continue;
      rest_where_run(weight.tensor, weight.disk ? map_weight(weight.bytes) : weight.cpu_value,
                     weight.disk ? "disk" : "cpu", weight.disk ? weight.bytes.bytes : tensor_bytes(weight.tensor),
                     weight.home);
    }
  }

  // Hooks the Sequentials whose children carry hooks, reports the bytes per device, and records
  // the dispatch in place of the model's earlier one.
  DispatchReport finish() {
    for (auto* sequential : sequentials_) hook_sequential(*sequential);
    for (const auto& [device, count] : bytes_) {
      if (count > 0) report_.bytes_per_device.emplace_back(device, count);
    }
    take_record(model_);  // sweeps destroyed models' records; the entry points removed this one's hooks
    auto& all = dispatches();
    std::lock_guard<std::mutex> lock(all.mutex);
    all.records[&model_] = std::move(record_);
    return std::move(report_);
  }

 private:
  // Hooks `target`, running on `execution`, when it holds offloaded weights or inputs must move.
  void hook(torch::nn::Module& target, c10::Device execution) {
    auto hooked = std::make_shared<HookedModule>();
    hooked->execution = execution;
    hooked->move_inputs = move_io_;
    std::unordered_set<const void*> seen;
    auto take = [&](const at::Tensor& tensor) {
      auto found = offloaded_.find(tensor.unsafeGetTensorImpl());
      if (found == offloaded_.end() || !seen.insert(found->first).second) return;
      hooked->weights.push_back(found->second);
      carried_.insert(found->first);
    };
    for (const auto& tensor : target.parameters()) take(tensor);
    for (const auto& tensor : target.buffers()) take(tensor);
    if (hooked->weights.empty() && !move_io_) return;
    record_.handles.push_back(register_forward_pre_hook(
        target, [hooked](torch::nn::Module&, ForwardArgs& args) { hooked->bring_in(args); }));
    record_.handles.push_back(
        register_forward_hook(target, [hooked](torch::nn::Module&, ForwardArgs&) { hooked->release(); }));
    if (auto* sequential = sequential_parent(parent_of_, &target)) {
      sequentials_.insert(sequential);
      hooked->release();  // acc calls it: its hooks will run
    } else {
      hooked->make_resident();  // until its guard line, if it has one, runs the hooks
    }
    record_.hooked.push_back(std::move(hooked));
  }

  void rest_where_run(const at::Tensor& tensor, const at::Tensor& value, const std::string& placement, uint64_t size,
                      c10::Device execution) {
    replace_data(tensor, value.to(execution));
    if (execution.is_cpu()) return;
    bytes_[placement] -= size;
    bytes_[execution.str()] += size;
  }

  torch::nn::Module& model_;
  const DeviceMap& map_;
  const c10::Device main_;
  const std::unordered_map<const torch::nn::Module*, torch::nn::Module*> parent_of_;
  std::map<std::string, torch::nn::Module*> modules_;
  bool move_io_ = false;
  DispatchReport report_;

  std::unordered_map<const void*, OffloadedWeight> offloaded_;
  std::vector<const PlacedTensor*> resident_now_;  // offloaded, but no module's hook can carry it
  std::map<std::string, uint64_t> bytes_;
  std::unordered_set<const void*> carried_;  // offloaded weights some hook carries

  DispatchRecord record_;
  std::set<torch::nn::SequentialImpl*> sequentials_;
};

}  // namespace

DispatchReport attach_dispatch(torch::nn::Module& model, const DeviceMap& map,
                               std::vector<PlacedTensor> placed, const DispatchOptions& options) {
  Attachment attachment(model, map, options);
  attachment.find_offloaded(placed);
  if (options.io_same_device()) attachment.hook_output_to_input_device();
  torch::NoGradGuard no_grad;
  attachment.hook_entries();
  attachment.rest_uncarried();
  return attachment.finish();
}

}  // namespace detail

void remove_hooks(torch::nn::Module& model) {
  auto record = detail::take_record(model);
  for (auto& handle : record.handles) handle.remove();
  for (auto& hooked : record.hooked) hooked->make_resident();
}

}  // namespace acc
