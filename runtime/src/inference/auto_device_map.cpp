// Accelerate's infer_auto_device_map, get_balanced_memory, compute_module_sizes and
// find_tied_parameters (utils/modeling.py, accelerate 1.15): a core over ModuleTree that follows
// Python's algorithm step by step, the adapter from torch::nn::Module, and the public functions.
#include <acc/device_map.h>
#include <acc/errors.h>
#include <acc/warnings.h>

#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <sstream>
#include <unordered_set>

#include "hooks/module_type.h"
#include "inference/module_tree.h"

namespace acc {
namespace detail {

// ---------------------------------------------------------------------------------------------
// SizeTable

void SizeTable::add(const std::string& name, uint64_t bits) {
  auto [it, inserted] = index_.emplace(name, items_.size());
  if (inserted) {
    items_.emplace_back(name, bits);
  } else {
    items_[it->second].second += bits;
  }
}

uint64_t SizeTable::at(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? 0 : items_[it->second].second;
}

bool SizeTable::contains(const std::string& name) const { return index_.count(name) != 0; }

namespace {

constexpr size_t kTensor = static_cast<size_t>(-1);

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

// Python's `name + "." in k + "."`: Accelerate's test of whether the tied parameter `k` is inside
// the module `name`. It is a substring test, not a prefix test ("0" is "inside" "layers.0.weight"),
// and device maps must come out as Accelerate's do, so it is kept.
bool inside(const std::string& name, const std::string& k) { return (k + ".").find(name + ".") != std::string::npos; }

// Python's named_children(): a child registered twice under one parent is listed once.
std::vector<std::pair<std::string, size_t>> named_children(const ModuleTree& tree, size_t module) {
  std::vector<std::pair<std::string, size_t>> out;
  std::vector<size_t> seen;
  for (const auto& [name, child] : tree.modules[module].children) {
    if (std::find(seen.begin(), seen.end(), child) != seen.end()) continue;
    seen.push_back(child);
    out.emplace_back(name, child);
  }
  return out;
}

// Python's named_parameters(recurse=False) / named_buffers(recurse=False): one name per tensor.
std::vector<const TreeTensor*> own(const std::vector<TreeTensor>& tensors) {
  std::vector<const TreeTensor*> out;
  std::unordered_set<size_t> seen;
  for (const auto& t : tensors) {
    if (seen.insert(t.id).second) out.push_back(&t);
  }
  return out;
}

// Python's named_modules(remove_duplicate=dedup), pre-order from `module` at `prefix`.
template <typename Visit>
void walk_modules(const ModuleTree& tree, size_t module, const std::string& prefix, bool dedup, std::vector<char>& seen,
                  const Visit& visit) {
  if (dedup) {
    if (seen[module]) return;
    seen[module] = 1;
  }
  visit(prefix, module);
  for (const auto& [name, child] : tree.modules[module].children) {
    walk_modules(tree, child, join(prefix, name), dedup, seen, visit);
  }
}

// Python's named_parameters()/named_buffers() with recurse=True: (name, tensor) pairs.
std::vector<std::pair<std::string, const TreeTensor*>> named_tensors(const ModuleTree& tree, size_t root, bool buffers,
                                                                     bool dedup) {
  std::vector<std::pair<std::string, const TreeTensor*>> out;
  std::vector<char> seen(tree.modules.size(), 0);
  std::unordered_set<size_t> memo;
  walk_modules(tree, root, "", dedup, seen, [&](const std::string& prefix, size_t module) {
    const auto& list = buffers ? tree.modules[module].buffers : tree.modules[module].parameters;
    for (const auto& t : list) {
      if (memo.count(t.id)) continue;
      if (dedup) memo.insert(t.id);
      out.emplace_back(join(prefix, t.name), &t);
    }
  });
  return out;
}

uint64_t tensor_bits(const TreeTensor& t, std::optional<uint64_t> dtype_bits) {
  if (!dtype_bits || !t.converts) return t.numel * t.element_bits;
  return t.numel * std::min(*dtype_bits, t.element_bits);
}

// One entry of Accelerate's modules_to_treat: a module, or a parameter or buffer (module == kTensor).
struct Item {
  std::string name;
  size_t module = kTensor;
};

bool no_split(const ModuleTree& tree, const Item& item, const std::vector<std::string>& classes) {
  if (item.module == kTensor) return false;
  const auto& type = tree.modules[item.module].type;
  return std::any_of(classes.begin(), classes.end(),
                     [&](const std::string& wanted) { return module_type_matches(type, wanted); });
}

std::vector<Item> child_items(const ModuleTree& tree, const Item& item) {
  std::vector<Item> out;
  if (item.module == kTensor) return out;
  for (const auto& [name, child] : named_children(tree, item.module)) out.push_back({item.name + "." + name, child});
  return out;
}

// A split module is replaced by its own parameters, then its children (not its own buffers).
std::vector<Item> split_items(const ModuleTree& tree, const Item& item) {
  std::vector<Item> out;
  for (const auto* p : own(tree.modules[item.module].parameters)) out.push_back({item.name + "." + p->name, kTensor});
  for (auto& child : child_items(tree, item)) out.push_back(std::move(child));
  return out;
}

std::vector<Item> module_items(const std::vector<Item>& items) {
  std::vector<Item> out;
  for (const auto& item : items) {
    if (item.module != kTensor) out.push_back(item);
  }
  return out;
}

// Accelerate's get_max_layer_size: the largest unsplittable layer (a module without children, one
// of a no-split class, or a tensor) and the names that reach it.
std::pair<uint64_t, std::vector<std::string>> max_layer_size(const ModuleTree& tree, const std::vector<Item>& items,
                                                             const SizeTable& sizes,
                                                             const std::vector<std::string>& classes) {
  uint64_t max_size = 0;
  std::vector<std::string> names;
  std::vector<Item> queue(items.rbegin(), items.rend());  // a stack: back() is the front of the queue
  while (!queue.empty()) {
    Item item = std::move(queue.back());
    queue.pop_back();
    auto children = child_items(tree, item);
    if (children.empty() || no_split(tree, item, classes)) {
      const uint64_t size = sizes.at(item.name);
      if (size > max_size) {
        max_size = size;
        names = {item.name};
      } else if (size == max_size) {
        names.push_back(item.name);
      }
    } else {
      for (auto it = children.rbegin(); it != children.rend(); ++it) queue.push_back(std::move(*it));
    }
  }
  return {max_size, names};
}

// Sizes are bits; limits are clamped to 2^59 bytes (512 PiB) so that they fit in bits.
int64_t limit_bits(uint64_t bytes) {
  constexpr uint64_t kMax = uint64_t{1} << 59;
  return static_cast<int64_t>(std::min(bytes, kMax) * 8);
}

std::string bytes_text(int64_t bits) {
  std::ostringstream out;
  if (bits % 8 == 0) {
    out << bits / 8;
  } else {
    out << static_cast<double>(bits) / 8.0;
  }
  return out.str();
}

std::string device_label(const std::string& device) {
  const int gpu = gpu_index(device);
  return gpu >= 0 ? std::to_string(gpu) : device;
}

std::string names_text(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + "]";
}

// Python's get_module_leaves over a size table's names.
std::vector<std::string> module_leaves(const std::vector<std::pair<std::string, uint64_t>>& items) {
  std::unordered_map<std::string, size_t> children;
  for (const auto& [name, size] : items) {
    const auto dot = name.rfind('.');
    if (name.empty() || dot == std::string::npos) continue;
    ++children[name.substr(0, dot)];
  }
  std::vector<std::string> leaves;
  for (const auto& [name, size] : items) {
    if (!name.empty() && children.count(name) == 0) leaves.push_back(name);
  }
  return leaves;
}

// Resolves a module_sizes name to a module (Python's getattr walk); kTensor for a tensor.
size_t module_at(const ModuleTree& tree, const std::string& name) {
  size_t module = 0;
  size_t start = 0;
  while (start <= name.size()) {
    auto end = name.find('.', start);
    if (end == std::string::npos) end = name.size();
    const std::string part = name.substr(start, end - start);
    const auto& children = tree.modules[module].children;
    auto found = std::find_if(children.begin(), children.end(), [&](const auto& c) { return c.first == part; });
    if (found == children.end()) return kTensor;
    module = found->second;
    start = end + 1;
  }
  return module;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Sizes and ties

SizeTable tree_module_sizes(const ModuleTree& tree, std::optional<uint64_t> dtype_bits, size_t root,
                            bool buffers_only) {
  SizeTable sizes;
  auto count = [&](const std::string& name, const TreeTensor& t) {
    const uint64_t bits = tensor_bits(t, dtype_bits);
    // "", then every dotted prefix, then the name itself (Python's range(len(name_parts) + 1)).
    sizes.add("", bits);
    size_t dot = name.find('.');
    while (dot != std::string::npos) {
      sizes.add(name.substr(0, dot), bits);
      dot = name.find('.', dot + 1);
    }
    sizes.add(name, bits);
  };
  if (!buffers_only) {
    for (const auto& [name, t] : named_tensors(tree, root, /*buffers=*/false, /*dedup=*/true)) count(name, *t);
  }
  for (const auto& [name, t] : named_tensors(tree, root, /*buffers=*/true, /*dedup=*/true)) count(name, *t);
  return sizes;
}

std::vector<std::vector<std::string>> tree_tied_parameters(const ModuleTree& tree) {
  const auto all = named_tensors(tree, 0, /*buffers=*/false, /*dedup=*/false);
  const auto unique = named_tensors(tree, 0, /*buffers=*/false, /*dedup=*/true);
  std::unordered_set<std::string> unique_names;
  std::unordered_map<size_t, size_t> unique_of_id;  // tensor id -> position in `unique`
  for (size_t i = 0; i < unique.size(); ++i) {
    unique_names.insert(unique[i].first);
    unique_of_id.emplace(unique[i].second->id, i);
  }
  std::vector<std::vector<std::string>> tied(unique.size());
  for (const auto& [name, t] : all) {
    if (unique_names.count(name)) continue;
    auto found = unique_of_id.find(t->id);
    if (found != unique_of_id.end()) tied[found->second].push_back(name);
  }
  std::vector<std::vector<std::string>> groups;
  for (size_t i = 0; i < unique.size(); ++i) {
    if (tied[i].empty()) continue;
    auto group = tied[i];
    group.push_back(unique[i].first);
    std::sort(group.begin(), group.end());
    group.erase(std::unique(group.begin(), group.end()), group.end());
    groups.push_back(std::move(group));
  }
  return groups;
}

// ---------------------------------------------------------------------------------------------
// clean_device_map

void clean_device_map(DeviceEntries& entries, const std::string& module_name) {
  const std::string prefix = module_name.empty() ? "" : module_name + ".";
  std::vector<size_t> under;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (starts_with(entries[i].first, prefix)) under.push_back(i);
  }
  if (under.size() > 1 && std::all_of(under.begin(), under.end(),
                                      [&](size_t i) { return entries[i].second == entries[under.front()].second; })) {
    const std::string device = entries[under.front()].second;
    // Python deletes the entries and assigns the module's: in place when the module already has an
    // entry, else at the end; here at the place of the first entry merged, to keep module order.
    const bool exists = std::any_of(entries.begin(), entries.end(), [&](const auto& e) {
      return e.first == module_name && !starts_with(e.first, prefix);
    });
    DeviceEntries kept;
    for (size_t i = 0; i < entries.size(); ++i) {
      if (starts_with(entries[i].first, prefix)) {
        if (i == under.front() && !exists) kept.emplace_back(module_name, device);
      } else if (entries[i].first == module_name) {
        kept.emplace_back(module_name, device);
      } else {
        kept.push_back(entries[i]);
      }
    }
    entries = std::move(kept);
  }

  // Recurse over the children: the names one level below `module_name` that entries start with.
  const size_t depth =
      module_name.empty() ? 1 : static_cast<size_t>(std::count(module_name.begin(), module_name.end(), '.')) + 2;
  std::vector<std::string> children;
  for (const auto& [name, device] : entries) {
    if (!starts_with(name, prefix) || name.size() <= module_name.size()) continue;
    size_t end = 0;
    for (size_t level = 0; level < depth && end != std::string::npos; ++level) {
      end = name.find('.', level == 0 ? 0 : end + 1);
    }
    std::string child = end == std::string::npos ? name : name.substr(0, end);
    if (std::find(children.begin(), children.end(), child) == children.end()) children.push_back(std::move(child));
  }
  for (const auto& child : children) clean_device_map(entries, child);
}

// ---------------------------------------------------------------------------------------------
// infer_auto_device_map

namespace {

// One item as the loop tries it on the current device: its size, what is tied to it, and the room
// the device has for it.
struct Candidate {
  Item item;
  int64_t module_size = 0;
  std::vector<std::string> tied_params;  // tied to a parameter inside the item, themselves outside it
  std::vector<Item> tied_items;          // for each tied parameter, the remaining item that holds it
  std::vector<std::string> tied_names;   // those items' names
  int64_t size_with_ties = 0;            // the item's size and its tied items', less the tied parameters
  std::string device;
  bool unlimited = false;  // "disk"
  int64_t current_max_size = 0;
  int64_t reserved = 0;  // kept free for the largest layer on a main device
};

// The state of Accelerate's infer_auto_device_map loop: the items left (modules and tensors, in
// order), the devices and how much each holds, and the largest layer still to place.
class Placer {
 public:
  Placer(const ModuleTree& tree, const PlacementOptions& options)
      : tree_(tree),
        options_(options),
        log_(options.verbose),
        sizes_(tree_module_sizes(tree, options.dtype_bits)),
        tied_parameters_(tree_tied_parameters(tree)) {
    init_devices();
    // The root's direct parameters, children, then buffers.
    for (const auto* p : own(tree.modules[0].parameters)) items_.push_back({p->name, kTensor});
    for (const auto& [name, child] : named_children(tree, 0)) items_.push_back({name, child});
    for (const auto* b : own(tree.modules[0].buffers)) items_.push_back({b->name, kTensor});
    auto [layer_size, layer_names] = max_layer_size(tree_, items_, sizes_, classes());
    max_layer_ = static_cast<int64_t>(layer_size);
    max_layer_names_ = std::move(layer_names);
  }

  DeviceEntries place() {
    while (!items_.empty()) {
      const Candidate candidate = next_candidate();
      if (fits(candidate)) {
        put(candidate);
      } else if (!split_a_tied_module(candidate) && !split_module(candidate)) {
        move_to_next_device(candidate);
      }
    }
    if (options_.clean_result) clean_device_map(device_map_);
    warn_about_buffers();
    log_minimum_assignment();
    return std::move(device_map_);
  }

 private:
  const std::vector<std::string>& classes() const { return options_.no_split_module_classes; }

  // Accelerate's _init_infer_auto_device_map: the devices in order, disk last, and which of them
  // run offloaded layers (GPU 0 and the CPU).
  void init_devices() {
    for (const auto& [device, bytes] : options_.max_memory) {
      devices_.push_back(device);
      max_memory_[device] = limit_bits(bytes);
    }
    if (std::find(devices_.begin(), devices_.end(), "disk") == devices_.end()) devices_.push_back("disk");
    for (const auto& d : devices_) {
      if (d != "cpu" && d != "disk") gpus_.push_back(d);
    }
    main_devices_ = gpus_.empty() ? std::vector<std::string>{"cpu"} : std::vector<std::string>{gpus_.front(), "cpu"};
    for (const auto& d : devices_) used_[d] = 0;
  }

  void update_max_layer() {
    auto [size, names] = max_layer_size(tree_, module_items(items_), sizes_, classes());
    max_layer_ = static_cast<int64_t>(size);
    max_layer_names_ = std::move(names);
  }

  // Takes the first item left and sizes it up against the current device.
  Candidate next_candidate() {
    Candidate c;
    c.item = items_.front();
    items_.erase(items_.begin());
    const std::string& name = c.item.name;
    if (log_) *log_ << "\nTreating module " << name << ".\n";
    // The largest remaining layer may have changed now that this one is taken.
    max_layer_names_.erase(std::remove_if(max_layer_names_.begin(), max_layer_names_.end(),
                                          [&](const std::string& n) { return n == name || starts_with(n, name + "."); }),
                           max_layer_names_.end());
    if (max_layer_names_.empty()) update_max_layer();
    c.module_size = static_cast<int64_t>(sizes_.at(name));
    c.tied_params = tied_params_of(name);

    c.device = devices_[current_device_];
    c.unlimited = c.device == "disk";
    c.current_max_size = c.unlimited ? 0 : max_memory_.at(c.device);
    // Keep room for the largest layer on the main devices (GPU 0 and the CPU run offloaded layers).
    if (std::find(main_devices_.begin(), main_devices_.end(), c.device) != main_devices_.end()) {
      c.current_max_size -= max_layer_;
      c.reserved = max_layer_;
    }
    add_ties(c);
    return c;
  }

  // Tied groups with a parameter inside the module `name` and one outside; the outside ones come along.
  std::vector<std::string> tied_params_of(const std::string& name) const {
    std::vector<const std::vector<std::string>*> tied_groups;
    for (const auto& group : tied_parameters_) {
      const bool any = std::any_of(group.begin(), group.end(), [&](const std::string& k) { return inside(name, k); });
      const bool all = std::all_of(group.begin(), group.end(), [&](const std::string& k) { return inside(name, k); });
      if (any && !all) tied_groups.push_back(&group);
    }
    std::vector<std::string> tied_params;
    for (const auto* group : tied_groups) {
      for (const auto& p : *group) {
        if (!inside(name, p)) tied_params.push_back(p);
      }
    }
    if (log_ && !tied_groups.empty()) {
      *log_ << "  Found the relevant tied param groups [";
      for (size_t i = 0; i < tied_groups.size(); ++i) *log_ << (i ? ", " : "") << names_text(*tied_groups[i]);
      *log_ << "]\n";
    }
    if (log_ && !tied_params.empty())
      *log_ << "  So those parameters need to be taken into account " << names_text(tied_params) << "\n";
    return tied_params;
  }

  // get_module_size_with_ties: each tied parameter brings the first remaining item that holds it.
  void add_ties(Candidate& c) const {
    c.size_with_ties = c.module_size;
    for (const auto& p : c.tied_params) {
      auto holder =
          std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return starts_with(p, i.name + "."); });
      if (holder == items_.end()) {
        throw Error("acc: infer_auto_device_map: the parameter '" + p + "' is tied to one in '" + c.item.name +
                    "' but is in no module left to place (Accelerate fails here too, with an IndexError)");
      }
      c.tied_items.push_back(*holder);
    }
    for (size_t i = 0; i < c.tied_params.size(); ++i) {
      c.size_with_ties +=
          static_cast<int64_t>(sizes_.at(c.tied_items[i].name)) - static_cast<int64_t>(sizes_.at(c.tied_params[i]));
    }
    for (const auto& t : c.tied_items) c.tied_names.push_back(t.name);
  }

  int64_t available(const Candidate& c) { return c.current_max_size - used_[c.device]; }

  // The module and the modules tied to it fit on this device.
  bool fits(const Candidate& c) { return c.unlimited || used_[c.device] + c.size_with_ties <= c.current_max_size; }

  void put(const Candidate& c) {
    if (log_) {
      *log_ << "Putting " << c.item.name;
      if (!c.tied_names.empty()) {
        *log_ << " and " << names_text(c.tied_names);
      } else {
        *log_ << " (size=" << bytes_text(c.module_size) << ")";
      }
      if (!c.unlimited) *log_ << " (available=" << bytes_text(available(c)) << ")";
      *log_ << " on " << device_label(c.device) << ".\n";
    }
    used_[c.device] += c.size_with_ties;
    assign(c.item.name, c.device);
    for (const auto& tied_name : c.tied_names) {
      auto found = std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return i.name == tied_name; });
      if (found != items_.end()) items_.erase(found);
      assign(tied_name, c.device);
    }
    if (!options_.offload_buffers && c.item.module != kTensor) {
      buffer_sizes_[c.device] +=
          static_cast<int64_t>(tree_module_sizes(tree_, options_.dtype_bits, c.item.module, true).at(""));
    }
  }

  void assign(const std::string& name, const std::string& device) {
    auto found = std::find_if(device_map_.begin(), device_map_.end(), [&](const auto& e) { return e.first == name; });
    if (found != device_map_.end()) {
      found->second = device;
    } else {
      device_map_.emplace_back(name, device);
    }
  }

  // The module alone fits: split the first of its tied modules that can be split, and try the module
  // again. False when it has no ties, does not fit alone, or none of them splits.
  bool split_a_tied_module(const Candidate& c) {
    if (c.tied_params.empty() || used_[c.device] + c.module_size > c.current_max_size) return false;
    if (log_) {
      *log_ << "Not enough space on " << device_label(c.device) << " to put " << c.item.name << " and "
            << names_text(c.tied_names) << " (space available " << bytes_text(available(c)) << ", needed size "
            << bytes_text(c.size_with_ties) << ").\n";
    }
    for (const auto& tied : c.tied_items) {
      if (child_items(tree_, tied).empty() || no_split(tree_, tied, classes())) continue;
      if (log_) *log_ << "Splitting " << tied.name << ".\n";
      const auto pieces = split_items(tree_, tied);
      auto at = std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return i.name == tied.name; });
      std::vector<Item> next{c.item};
      next.insert(next.end(), items_.begin(), at);
      next.insert(next.end(), pieces.begin(), pieces.end());
      next.insert(next.end(), at + 1, items_.end());
      items_ = std::move(next);
      update_max_layer();
      return true;
    }
    if (log_) *log_ << "None of the tied module can be split, going to the next device.\n";
    return false;
  }

  // The module does not fit: split it into its parameters and children. False when it fits, or
  // cannot be split.
  bool split_module(const Candidate& c) {
    if (used_[c.device] + c.module_size < c.current_max_size) return false;
    if (log_) {
      *log_ << "Not enough space on " << device_label(c.device) << " to put " << c.item.name << " (space available "
            << bytes_text(available(c)) << ", module size " << bytes_text(c.module_size) << ").\n";
    }
    if (child_items(tree_, c.item).empty() || no_split(tree_, c.item, classes())) {
      if (log_) *log_ << "This module cannot be split, going to the next device.\n";
      return false;
    }
    if (log_) *log_ << "Splitting " << c.item.name << ".\n";
    auto pieces = split_items(tree_, c.item);
    items_.insert(items_.begin(), pieces.begin(), pieces.end());
    update_max_layer();
    return true;
  }

  // The module goes back to the front, for the next device; a device that got nothing records what
  // it would have needed.
  void move_to_next_device(const Candidate& c) {
    if (used_[c.device] == 0) minimum_assignment_.emplace_back(c.device, c.size_with_ties + c.reserved);
    used_[c.device] += c.reserved;
    ++current_device_;
    if (current_device_ >= devices_.size()) {
      throw Error("acc: infer_auto_device_map: no device left for '" + c.item.name +
                  "' (disk must be the last device)");
    }
    items_.insert(items_.begin(), c.item);
  }

  // Offloaded modules' buffers stay on the execution device unless offload_buffers: warn when
  // they fit on no GPU beside what it holds (Accelerate's warning; the map is the same either way).
  void warn_about_buffers() {
    const int64_t non_gpu_buffers = buffer_sizes_["cpu"] + buffer_sizes_["disk"];
    if (non_gpu_buffers <= 0 || options_.offload_buffers || gpus_.empty()) return;
    bool fits = false;
    for (const auto& [device, bytes] : options_.max_memory) {
      if (device == "cpu" || device == "disk") continue;
      if (limit_bits(bytes) >= non_gpu_buffers + used_[device]) fits = true;
    }
    if (!fits) {
      warn("acc: warning: the offloaded layers need " + bytes_text(non_gpu_buffers) +
           " bytes of buffers on the execution device, which do not seem to fit in any GPU's remaining "
           "memory; if you run out of memory, set offload_buffers(true)");
    }
  }

  void log_minimum_assignment() const {
    if (!log_ || minimum_assignment_.empty()) return;
    *log_ << "No module could be assigned to these devices for lack of memory:\n";
    for (const auto& [device, bits] : minimum_assignment_) {
      *log_ << "  - " << device_label(device) << ": " << bytes_text(bits) << " bytes required\n";
    }
  }

  const ModuleTree& tree_;
  const PlacementOptions& options_;
  std::ostream* log_;
  const SizeTable sizes_;
  const std::vector<std::vector<std::string>> tied_parameters_;

  std::vector<std::string> devices_;
  std::unordered_map<std::string, int64_t> max_memory_;  // bits
  std::vector<std::string> gpus_;
  std::vector<std::string> main_devices_;
  size_t current_device_ = 0;
  std::unordered_map<std::string, int64_t> used_;
  std::unordered_map<std::string, int64_t> buffer_sizes_;  // own buffers of the modules placed, per device
  std::vector<std::pair<std::string, int64_t>> minimum_assignment_;

  std::vector<Item> items_;  // left to place
  int64_t max_layer_ = 0;
  std::vector<std::string> max_layer_names_;
  DeviceEntries device_map_;
};

}  // namespace

DeviceEntries tree_infer_device_map(const ModuleTree& tree, const PlacementOptions& options) {
  return Placer(tree, options).place();
}

// ---------------------------------------------------------------------------------------------
// get_balanced_memory

DeviceBytes tree_balanced_memory(const ModuleTree& tree, DeviceBytes max_memory, bool user_set,
                                 const std::vector<std::string>& no_split_module_classes,
                                 std::optional<uint64_t> dtype_bits, bool low_zero) {
  auto bytes_of = [&](int gpu) -> uint64_t& {
    for (auto& [device, bytes] : max_memory) {
      if (gpu_index(device) == gpu) return bytes;
    }
    throw ConfigError("acc: get_balanced_memory: max_memory has no entry for GPU " + std::to_string(gpu) +
                      "; balanced_low_0 needs GPUs numbered from 0");
  };
  size_t num_devices = 0;
  for (const auto& [device, bytes] : max_memory) {
    if (gpu_index(device) >= 0 && bytes > 0) ++num_devices;
  }
  if (num_devices == 0) return max_memory;
  if (num_devices == 1) {
    low_zero = false;  // one GPU: nothing to keep free, but detected memory keeps 10% for the buffer
    if (!user_set) {
      for (auto& [device, bytes] : max_memory) {
        if (gpu_index(device) >= 0) {
          bytes = static_cast<uint64_t>(static_cast<double>(bytes) * 0.9);
          break;
        }
      }
    }
  }

  const SizeTable sizes = tree_module_sizes(tree, dtype_bits);
  const uint64_t total_bits = sizes.at("");
  const uint64_t divisor = low_zero ? num_devices - 1 : num_devices;
  uint64_t per_gpu = total_bits / (8 * divisor);

  // The buffer added to each GPU's share: the largest of the first no-split block of each class and
  // the mean size of the innermost modules, times 1.25.
  uint64_t block_bits = 0;
  if (!no_split_module_classes.empty()) {
    std::vector<char> found(no_split_module_classes.size(), 0);
    for (const auto& [name, bits] : sizes.items()) {
      if (name.empty()) continue;
      const size_t module = module_at(tree, name);
      if (module != kTensor) {
        for (size_t c = 0; c < no_split_module_classes.size(); ++c) {
          if (!found[c] && module_type_matches(tree.modules[module].type, no_split_module_classes[c])) {
            found[c] = 1;
            block_bits = std::max(block_bits, bits);
          }
        }
      }
      if (std::all_of(found.begin(), found.end(), [](char f) { return f != 0; })) break;
    }
  }
  const auto first_leaves = module_leaves(sizes.items());
  const std::unordered_set<std::string> first_set(first_leaves.begin(), first_leaves.end());
  std::vector<std::pair<std::string, uint64_t>> modules;
  for (const auto& entry : sizes.items()) {
    if (!first_set.count(entry.first)) modules.push_back(entry);
  }
  const auto leaves = module_leaves(modules);
  const std::unordered_set<std::string> leaf_set(leaves.begin(), leaves.end());
  uint64_t leaves_bits = 0;
  for (const auto& [name, bits] : modules) {
    if (leaf_set.count(name)) leaves_bits += bits;
  }
  const double mean_leaves =
      std::trunc(static_cast<double>(leaves_bits) / 8.0 / static_cast<double>(std::max<size_t>(leaves.size(), 1)));
  const auto buffer = static_cast<uint64_t>(1.25 * std::max(static_cast<double>(block_bits) / 8.0, mean_leaves));
  per_gpu += buffer;

  std::vector<int> gpus;
  for (const auto& [device, bytes] : max_memory) {
    if (gpu_index(device) >= 0 && bytes > 0) gpus.push_back(gpu_index(device));
  }
  std::sort(gpus.begin(), gpus.end());
  // The last GPU keeps its whole limit, in case the buffer is not enough.
  for (size_t i = 0; i + 1 < gpus.size(); ++i) {
    uint64_t& bytes = bytes_of(gpus[i]);
    bytes = std::min(low_zero && gpus[i] == 0 ? bytes_of(0) : per_gpu, bytes);
  }
  if (low_zero) {
    uint64_t others = 0;
    for (size_t i = 1; i < num_devices; ++i) others += bytes_of(static_cast<int>(i));
    // What the other GPUs cannot hold, rounded up to whole bytes.
    const uint64_t rest_bits = total_bits > 8 * others ? total_bits - 8 * others : 0;
    bytes_of(0) = std::min((rest_bits + 7) / 8, bytes_of(0));
  }
  return max_memory;
}

// ---------------------------------------------------------------------------------------------
// The tree of a torch::nn::Module

namespace {
// torch's integer dtypes of 1 to 7 bits (uint1..uint7, int1..int7).
bool is_sub_byte_integer(c10::ScalarType dtype) {
  using c10::ScalarType;
  switch (dtype) {
    case ScalarType::UInt1:
    case ScalarType::UInt2:
    case ScalarType::UInt3:
    case ScalarType::UInt4:
    case ScalarType::UInt5:
    case ScalarType::UInt6:
    case ScalarType::UInt7:
    case ScalarType::Int1:
    case ScalarType::Int2:
    case ScalarType::Int3:
    case ScalarType::Int4:
    case ScalarType::Int5:
    case ScalarType::Int6:
    case ScalarType::Int7:
      return true;
    default:
      return false;
  }
}
}  // namespace

uint64_t element_bits(c10::ScalarType dtype) {
  using c10::ScalarType;
  // 0 where Python's name ends in a width under 8 ("uint4", "quint4x2", "float4_e2m1fn_x2").
  if (is_sub_byte_integer(dtype)) return 0;
  switch (dtype) {
    case ScalarType::Bool:
      return 1;
    case ScalarType::QUInt4x2:
    case ScalarType::QUInt2x4:
    case ScalarType::Bits2x4:
    case ScalarType::Bits4x2:
    case ScalarType::Float4_e2m1fn_x2:
      return 0;
    default:
      return static_cast<uint64_t>(c10::elementSize(dtype)) * 8;
  }
}

bool converts_to_requested_dtype(c10::ScalarType dtype) {
  using c10::ScalarType;
  switch (dtype) {
    case ScalarType::Bool:
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Long:
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64:
      return false;
    default:
      return !is_sub_byte_integer(dtype);
  }
}

ModuleTree module_tree(const torch::nn::Module& model) {
  ModuleTree tree;
  std::unordered_map<const torch::nn::Module*, size_t> index;
  std::unordered_map<const void*, size_t> ids;
  auto describe = [&](const std::string& name, const at::Tensor& tensor) {
    TreeTensor t;
    t.name = name;
    t.numel = static_cast<uint64_t>(tensor.numel());  // shapes only: meta tensors do
    t.element_bits = element_bits(tensor.scalar_type());
    t.converts = converts_to_requested_dtype(tensor.scalar_type());
    t.id = ids.emplace(tensor.unsafeGetTensorImpl(), ids.size()).first->second;
    return t;
  };
  // Iterative pre-order, so that deep models do not recurse.
  auto add = [&](const torch::nn::Module& module) {
    auto [it, inserted] = index.emplace(&module, tree.modules.size());
    if (!inserted) return std::make_pair(it->second, false);
    TreeModule node;
    node.type = module.name();
    for (const auto& p : module.named_parameters(/*recurse=*/false)) {
      if (p.value().defined()) node.parameters.push_back(describe(p.key(), p.value()));
    }
    for (const auto& b : module.named_buffers(/*recurse=*/false)) {
      if (b.value().defined()) node.buffers.push_back(describe(b.key(), b.value()));
    }
    tree.modules.push_back(std::move(node));
    return std::make_pair(it->second, true);
  };
  std::vector<std::pair<const torch::nn::Module*, size_t>> stack;
  stack.emplace_back(&model, add(model).first);
  while (!stack.empty()) {
    auto [module, position] = stack.back();
    stack.pop_back();
    std::vector<std::pair<const torch::nn::Module*, size_t>> fresh;
    for (const auto& child : module->named_children()) {
      if (!child.value()) continue;
      auto [child_position, inserted] = add(*child.value());
      tree.modules[position].children.emplace_back(child.key(), child_position);
      if (inserted) fresh.emplace_back(child.value().get(), child_position);
    }
    for (auto it = fresh.rbegin(); it != fresh.rend(); ++it) stack.push_back(*it);
  }
  return tree;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Public functions

namespace {
std::optional<uint64_t> dtype_bits(const std::optional<c10::ScalarType>& dtype) {
  if (!dtype) return std::nullopt;
  return detail::element_bits(*dtype);
}

DeviceMap to_device_map(const detail::DeviceEntries& entries) {
  DeviceMap map;
  for (const auto& [module, device] : entries) map.set(module, device);
  return map;
}
}  // namespace

std::vector<std::pair<std::string, uint64_t>> compute_module_sizes(const torch::nn::Module& model,
                                                                   std::optional<c10::ScalarType> dtype) {
  const auto sizes = detail::tree_module_sizes(detail::module_tree(model), dtype_bits(dtype));
  std::vector<std::pair<std::string, uint64_t>> out;
  out.reserve(sizes.items().size());
  for (const auto& [name, bits] : sizes.items()) out.emplace_back(name, (bits + 7) / 8);
  return out;
}

std::vector<std::vector<std::string>> find_tied_parameters(const torch::nn::Module& model) {
  return detail::tree_tied_parameters(detail::module_tree(model));
}

DeviceMap infer_auto_device_map(const torch::nn::Module& model, const AutoDeviceMapOptions& options) {
  detail::PlacementOptions placement;
  placement.max_memory = get_max_memory(options.max_memory());
  placement.no_split_module_classes = options.no_split_module_classes();
  placement.dtype_bits = dtype_bits(options.dtype());
  placement.clean_result = options.clean_result();
  placement.offload_buffers = options.offload_buffers();
  placement.verbose = options.verbose() ? &std::cout : nullptr;
  return to_device_map(detail::tree_infer_device_map(detail::module_tree(model), placement));
}

MaxMemory get_balanced_memory(const torch::nn::Module& model, const AutoDeviceMapOptions& options, bool low_zero) {
  return detail::tree_balanced_memory(detail::module_tree(model), get_max_memory(options.max_memory()),
                                      /*user_set=*/!options.max_memory().empty(), options.no_split_module_classes(),
                                      dtype_bits(options.dtype()), low_zero);
}

DeviceMap resolve_device_map(const torch::nn::Module& model, const std::string& device_map,
                             const AutoDeviceMapOptions& options) {
  if (device_map == "auto" || device_map == "balanced" || device_map == "balanced_low_0") {
    AutoDeviceMapOptions balanced = options;
    balanced.max_memory(get_balanced_memory(model, options, /*low_zero=*/device_map == "balanced_low_0"));
    return infer_auto_device_map(model, balanced);
  }
  if (device_map == "sequential") return infer_auto_device_map(model, options);
  if (!device_map.empty() && device_map.front() == '{') return DeviceMap::from_json(device_map);
  if (auto device = detail::normalise_device(device_map)) return DeviceMap{{"", *device}};
  throw ConfigError("acc: device_map '" + device_map +
                    "' is not one of \"auto\", \"balanced\", \"balanced_low_0\", \"sequential\", a device "
                    "(\"cpu\", \"cuda:N\", \"disk\") or a device map's JSON");
}

}  // namespace acc
