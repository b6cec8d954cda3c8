#include "fsdp/wrap_policy.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace acc {

namespace {
struct Marks {
  std::mutex mutex;
  std::unordered_set<const torch::nn::Module*> modules;
};
Marks& marks() {
  static Marks instance;
  return instance;
}
}  // namespace

void fully_shard(torch::nn::Module& module) {
  std::lock_guard<std::mutex> lock(marks().mutex);
  marks().modules.insert(&module);
}

bool is_marked_fully_shard(const torch::nn::Module& module) {
  std::lock_guard<std::mutex> lock(marks().mutex);
  return marks().modules.count(&module) != 0;
}

namespace detail {

std::vector<UnitModule> select_units(torch::nn::Module& model, const std::vector<NamedTensor>& params,
                                     const ResolvedFsdpPlugin& plugin) {
  std::unordered_map<const void*, size_t> index_of;
  for (size_t i = 0; i < params.size(); ++i) index_of[params[i].tensor.unsafeGetTensorImpl()] = i;

  // Pre-order, the root first; a module's children follow it.
  const auto modules = model.named_modules("", /*include_self=*/true);
  std::vector<torch::nn::Module*> order;
  std::vector<std::string> paths;
  for (const auto& item : modules) {
    order.push_back(item.value().get());
    paths.push_back(item.key());
  }
  std::unordered_map<const torch::nn::Module*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;

  std::vector<bool> wrapped(order.size(), false);
  for (size_t i = 1; i < order.size(); ++i) {
    if (is_marked_fully_shard(*order[i])) wrapped[i] = true;
    if (plugin.auto_wrap_policy == AutoWrapPolicy::TRANSFORMER_BASED_WRAP) {
      for (const auto& wanted : plugin.transformer_cls_names_to_wrap) {
        if (module_type_matches(order[i]->name(), wanted)) wrapped[i] = true;
      }
    }
  }
  if (plugin.auto_wrap_policy == AutoWrapPolicy::SIZE_BASED_WRAP) {
    // torch's size_based_auto_wrap_policy, bottom up: a module is a unit when the parameters no
    // unit below it holds reach the minimum.
    std::vector<int64_t> unwrapped(order.size(), 0);
    for (size_t i = order.size(); i-- > 1;) {
      for (const auto& p : order[i]->parameters(/*recurse=*/false)) unwrapped[i] += p.numel();
      for (const auto& child : order[i]->children()) {
        const size_t c = position.at(child.get());
        if (!wrapped[c]) unwrapped[i] += unwrapped[c];
      }
      if (unwrapped[i] >= plugin.min_num_params) wrapped[i] = true;
    }
  }

  // Each parameter goes to the innermost unit around the module that registered it; one that two
  // units register (tied weights) goes to the root, which is whole around both.
  std::vector<size_t> unit_of_module(order.size(), 0);  // position of the enclosing unit's module
  for (size_t i = 1; i < order.size(); ++i) {
    // A child's enclosing unit is itself if wrapped, else its parent's.
    unit_of_module[i] = wrapped[i] ? i : 0;
  }
  for (size_t i = 0; i < order.size(); ++i) {
    for (const auto& child : order[i]->children()) {
      const size_t c = position.at(child.get());
      if (!wrapped[c]) unit_of_module[c] = unit_of_module[i];
    }
  }
  constexpr size_t kUnassigned = static_cast<size_t>(-1);
  std::vector<size_t> owner(params.size(), kUnassigned);
  for (size_t i = 0; i < order.size(); ++i) {
    for (const auto& p : order[i]->parameters(/*recurse=*/false)) {
      auto found = index_of.find(p.unsafeGetTensorImpl());
      if (found == index_of.end()) continue;  // frozen: stays whole, outside every unit
      size_t& slot = owner[found->second];
      slot = (slot == kUnassigned || slot == unit_of_module[i]) ? unit_of_module[i] : 0;
    }
  }

  std::unordered_map<size_t, UnitModule> units;
  for (size_t p = 0; p < params.size(); ++p) {
    const size_t unit = owner[p] == kUnassigned ? 0 : owner[p];
    auto& entry = units[unit];
    entry.module = order[unit];
    entry.path = paths[unit];
    entry.params.push_back(p);
  }
  std::vector<UnitModule> out;
  for (auto& [position_of_unit, unit] : units) {
    if (position_of_unit != 0) out.push_back(std::move(unit));
  }
  std::sort(out.begin(), out.end(),
            [](const UnitModule& a, const UnitModule& b) { return a.params.front() > b.params.front(); });
  if (units.count(0)) out.push_back(std::move(units.at(0)));
  return out;
}

}  // namespace detail
}  // namespace acc
