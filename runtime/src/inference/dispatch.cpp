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

// The longest entry that is `name` or a dot-prefix of it; -1 for none.
int entry_of(const DeviceMap& map, const std::string& name) {
  int best = -1;
  size_t best_length = 0;
  for (const auto i : c10::irange(map.entries().size())) {
    const auto& entry = map.entries()[i].first;
    const bool covers = entry.empty() || name == entry ||
                        (name.size() > entry.size() && name.compare(0, entry.size(), entry) == 0 &&
                         name[entry.size()] == '.');
    if (covers && (best < 0 || entry.size() >= best_length)) {
      best = static_cast<int>(i);
      best_length = entry.size();
    }
  }
  return best;
}

at::Tensor empty_like_meta(const at::Tensor& tensor) {
  return at::empty(tensor.sizes(), tensor.options().device(c10::kMeta));
}

uint64_t tensor_bytes(const at::Tensor& tensor) {
  return static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
}

// One hooked module: the weights it brings in around its forward.
struct HookedModule {
  std::string name;
  torch::nn::Module* module = nullptr;
  c10::Device execution = c10::Device(c10::kCPU);
  bool move_inputs = false;
  struct Weight {
    at::Tensor tensor;
    bool disk = false;
    DiskWeight bytes;      // disk
    at::Tensor cpu_value;  // cpu
  };
  std::vector<Weight> weights;
  bool seam_seen = false;  // its hooks ran: disk weights may rest empty

  void bring_in(ForwardArgs& args) {
    torch::NoGradGuard no_grad;
    const bool copy = testing::forced_on_cpu().offload_copies;
    for (auto& weight : weights) {
      if (weight.disk) {
        replace_data(weight.tensor, map_weight(weight.bytes).to(execution));
      } else {
        replace_data(weight.tensor, weight.cpu_value.to(execution, /*non_blocking=*/false, copy));
      }
    }
    if (move_inputs) {
      for (auto* input : args.inputs) {
        if (input->defined() && input->device() != execution) *input = input->to(execution);
      }
    }
  }

  void release() {
    torch::NoGradGuard no_grad;
    seam_seen = true;
    for (auto& weight : weights) {
      replace_data(weight.tensor, weight.disk ? empty_like_meta(weight.tensor) : weight.cpu_value);
    }
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

// Takes the record of `model` out of the registry (none, or a destroyed model's: empty).
DispatchRecord take_record(const torch::nn::Module& model) {
  auto& all = dispatches();
  std::lock_guard<std::mutex> lock(all.mutex);
  auto it = all.records.find(&model);
  if (it == all.records.end()) return {};
  DispatchRecord record = std::move(it->second);
  all.records.erase(it);
  if (record.owned && record.owner.expired()) return {};
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
    if (entry_of(map, name) < 0) {
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

DispatchReport attach_dispatch(torch::nn::Module& model, const DeviceMap& map,
                               std::vector<PlacedTensor> placed, const DispatchOptions& options) {
  const c10::Device main = main_device(map, options);
  const bool copies = testing::forced_on_cpu().offload_copies;
  auto execution_of = [&](const std::string& device) {
    return device == "cpu" || device == "disk" ? main : c10::Device(device);
  };
  std::map<std::string, torch::nn::Module*> modules;
  for (const auto& item : model.named_modules()) modules.emplace(item.key(), item.value().get());

  DispatchReport report;
  report.device_map = map;
  std::set<std::string> execution_devices;
  for (const auto& [name, device] : map.entries()) {
    report.execution_devices.emplace_back(name, execution_of(device).str());
    execution_devices.insert(execution_of(device).str());
  }
  // Inputs move where a module runs when that is not where every input already is: several
  // execution devices, or a GPU (inputs usually arrive on the CPU).
  const bool move_io = execution_devices.size() > 1 || *execution_devices.begin() != "cpu";

  // Weights of each entry that rest away from where the entry runs.
  std::vector<std::vector<HookedModule::Weight>> offloaded(map.entries().size());
  std::map<std::string, uint64_t> bytes;
  {
    torch::NoGradGuard no_grad;
    for (auto& tensor : placed) {
      const int entry = entry_of(map, tensor.name);
      const auto& [entry_name, device] = map.entries()[static_cast<size_t>(entry)];
      const c10::Device execution = execution_of(device);
      const bool module_entry = modules.count(entry_name) != 0;
      bytes[tensor.placement] += tensor.placement == "disk" ? tensor.disk.bytes : tensor_bytes(tensor.tensor);
      if (tensor.placement == "disk") {
        HookedModule::Weight weight{tensor.tensor, true, tensor.disk, {}};
        if (module_entry) {
          offloaded[static_cast<size_t>(entry)].push_back(weight);
        } else {  // a weight's own entry: nothing runs around it, so it stays mapped
          replace_data(tensor.tensor, map_weight(tensor.disk).to(execution));
        }
      } else if (tensor.placement == "cpu" && (execution.type() != c10::kCPU || copies)) {
        if (module_entry) {
          offloaded[static_cast<size_t>(entry)].push_back({tensor.tensor, false, {}, tensor.tensor.data()});
        } else {
          replace_data(tensor.tensor, tensor.tensor.to(execution));
        }
      }
    }
  }
  for (const auto& [device, count] : bytes) report.bytes_per_device.emplace_back(device, count);

  auto record = take_record(model);  // the entry points removed an earlier dispatch's hooks
  for (auto& handle : record.handles) handle.remove();
  record = DispatchRecord{};
  record.owner = model.weak_from_this();
  record.owned = !record.owner.expired();

  std::set<torch::nn::SequentialImpl*> sequentials;
  std::unordered_map<const torch::nn::Module*, torch::nn::Module*> parent_of;
  for (const auto& item : model.named_modules()) {
    for (const auto& child : item.value()->children()) parent_of[child.get()] = item.value().get();
  }
  auto sequential_parent = [&](torch::nn::Module* module) -> torch::nn::SequentialImpl* {
    auto it = parent_of.find(module);
    return it == parent_of.end() ? nullptr : dynamic_cast<torch::nn::SequentialImpl*>(it->second);
  };

  for (const auto i : c10::irange(map.entries().size())) {
    const auto& [entry_name, device] = map.entries()[i];
    auto module_it = modules.find(entry_name);
    if (module_it == modules.end()) continue;
    const c10::Device execution = execution_of(device);
    if (offloaded[i].empty() && !move_io) continue;

    std::vector<std::pair<std::string, torch::nn::Module*>> targets;
    hook_targets(*module_it->second, entry_name, targets);
    // The weights each target carries: those under its name.
    std::unordered_set<const void*> carried;
    for (const auto& [target_name, target] : targets) {
      auto hooked = std::make_shared<HookedModule>();
      hooked->name = target_name;
      hooked->module = target;
      hooked->execution = execution;
      hooked->move_inputs = move_io;
      std::unordered_set<const void*> mine;
      for (const auto& tensor : target->parameters()) mine.insert(tensor.unsafeGetTensorImpl());
      for (const auto& tensor : target->buffers()) mine.insert(tensor.unsafeGetTensorImpl());
      for (const auto& weight : offloaded[i]) {
        if (mine.count(weight.tensor.unsafeGetTensorImpl()) != 0) {
          hooked->weights.push_back(weight);
          carried.insert(weight.tensor.unsafeGetTensorImpl());
        }
      }
      if (hooked->weights.empty() && !move_io) continue;
      auto* sequential = sequential_parent(target);
      if (sequential == nullptr && is_builtin(*target) && !hooked->weights.empty() &&
          execution.type() != c10::kCPU) {
        throw ConfigError(
            "acc: '" + target_name + "' (" + target->name() + ") keeps its weights on " + device +
            " and runs on " + execution.str() + ", which needs hooks around its forward, but acc only "
            "sees the calls of Sequential children and of modules whose forward opens "
            "acc::ForwardHooksGuard; put it on " + execution.str() + " in the device map, make its "
            "parent module the entry (with the guard line in the parent's forward), or call it "
            "through a torch::nn::Sequential");
      }
      record.handles.push_back(register_forward_pre_hook(
          *target, [hooked](torch::nn::Module&, ForwardArgs& args) { hooked->bring_in(args); }));
      record.handles.push_back(register_forward_hook(
          *target, [hooked](torch::nn::Module&, ForwardArgs&) { hooked->release(); }));
      if (sequential != nullptr) {
        sequentials.insert(sequential);
        hooked->release();  // acc calls it: its hooks will run
      } else {
        hooked->make_resident();
        hooked->seam_seen = false;
      }
      record.hooked.push_back(std::move(hooked));
    }
    // A container's or the root's own weights: no hook carries them, so they rest where they run.
    torch::NoGradGuard no_grad;
    for (const auto& weight : offloaded[i]) {
      if (carried.count(weight.tensor.unsafeGetTensorImpl()) != 0) continue;
      replace_data(weight.tensor, weight.disk ? map_weight(weight.bytes).to(execution)
                                              : weight.cpu_value.to(execution));
    }
  }

  // Output back to the input's device when acc calls the root's last child.
  auto* root = dynamic_cast<torch::nn::SequentialImpl*>(&model);
  if (options.io_same_device() && move_io && root != nullptr && root->size() > 0) {
    auto input_device = std::make_shared<std::optional<c10::Device>>();
    auto& first = *root->children().front();
    auto& last = *root->children().back();
    record.handles.push_back(register_forward_pre_hook(
        first, [input_device](torch::nn::Module&, ForwardArgs& args) {
          if (!args.inputs.empty() && args.inputs.front()->defined()) {
            *input_device = args.inputs.front()->device();
          }
        }));
    record.handles.push_back(register_forward_hook(
        last, [input_device](torch::nn::Module&, ForwardArgs& args) {
          if (args.output != nullptr && *input_device && args.output->defined() &&
              args.output->device() != **input_device) {
            *args.output = args.output->to(**input_device);
          }
        }));
    sequentials.insert(root);
  }
  for (auto* sequential : sequentials) hook_sequential(*sequential);

  auto& all = dispatches();
  std::lock_guard<std::mutex> lock(all.mutex);
  all.records[&model] = std::move(record);
  return report;
}

}  // namespace detail

void remove_hooks(torch::nn::Module& model) {
  auto record = detail::take_record(model);
  for (auto& handle : record.handles) handle.remove();
  for (auto& hooked : record.hooked) hooked->make_resident();
}

}  // namespace acc
