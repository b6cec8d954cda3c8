#include "fsdp/full_shard.h"

#include <c10/core/GradMode.h>
#include <torch/nn/modules/container/sequential.h>

#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <acc/warnings.h>

#include "fsdp/sharded_reducer.h"
#include "hooks/hook_registry.h"

namespace acc::detail {

FullShardUnits::FullShardUnits(torch::nn::Module& model, ShardedReducer& reducer, std::vector<UnitModule> units,
                               bool reshard_after_forward, bool activation_checkpointing)
    : reducer_(reducer),
      units_(std::move(units)),
      flats_(units_.size()),
      seen_(units_.size(), false),
      reshard_after_forward_(reshard_after_forward) {
  std::unordered_map<size_t, size_t> unit_of_param;
  for (size_t u = 0; u < units_.size(); ++u) {
    for (size_t p : units_[u].params) unit_of_param[p] = u;
  }
  for (size_t f = 0; f < reducer_.units().size(); ++f) {
    flats_[unit_of_param.at(reducer_.units()[f].members.front())].push_back(f);
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    auto& module = *units_[u].module;
    handles_.push_back(register_forward_pre_hook(module, [this, u](torch::nn::Module&) { before_forward(u); }));
    handles_.push_back(register_forward_hook(module, [this, u](torch::nn::Module&) { after_forward(u); }));
    handles_.push_back(register_backward_pre_hook(module, [this, u](torch::nn::Module&) { gather(u); }));
  }
  // Units a Sequential calls need no line in their forward.
  std::unordered_set<const torch::nn::Module*> sequential_children;
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    if (auto* sequential = item.value()->as<torch::nn::Sequential>()) {
      hook_sequential(*sequential);
      for (const auto& child : sequential->children()) sequential_children.insert(child.get());
    }
  }
  if (activation_checkpointing) {
    std::set<std::string> unreached;
    for (size_t u = 0; u < units_.size(); ++u) {
      if (units_[u].path.empty()) continue;  // the root: its caller is the training loop
      if (sequential_children.count(units_[u].module) != 0) {
        set_checkpointed(*units_[u].module, true);
      } else {
        unreached.insert(units_[u].module->name());
      }
    }
    if (!unreached.empty()) {
      std::string names;
      for (const auto& name : unreached) names += (names.empty() ? "" : ", ") + name;
      warn("acc: note: FSDP activation checkpointing recomputes the units a Sequential calls; " + names +
           " units are called by your code: wrap those calls in acc::checkpoint(...) to checkpoint them "
           "(docs/hooks.md)");
    }
  }
  std::vector<size_t> unit_of_flat(reducer_.units().size());
  for (size_t u = 0; u < units_.size(); ++u) {
    for (size_t f : flats_[u]) unit_of_flat[f] = u;
  }
  // Backward produced every gradient of the flat unit: its parameters are not needed any more.
  reducer_.set_on_unit_backward_done([this, unit_of_flat](size_t flat) {
    if (seen_[unit_of_flat[flat]]) reducer_.release(flat);
  });
}

FullShardUnits::~FullShardUnits() {
  reducer_.set_on_unit_backward_done(nullptr);
  for (const auto& unit : units_) set_checkpointed(*unit.module, false);
  for (auto& handle : handles_) handle.remove();
}

void FullShardUnits::before_forward(size_t unit) {
  if (!seen_[unit]) {
    // From now on this unit is gathered around its uses, so a step may leave it released.
    seen_[unit] = true;
    for (size_t f : flats_[unit]) reducer_.set_whole_at_rest(f, false);
  }
  gather(unit);
}

void FullShardUnits::after_forward(size_t unit) {
  // The root's backward starts right after its forward, so it stays whole for it (as in torch);
  // without a graph (eval under NoGradGuard) no backward follows.
  const bool root = unit + 1 == units_.size() && units_[unit].path.empty();
  if (reshard_after_forward_ && (!root || !c10::GradMode::is_enabled())) release(unit);
}

void FullShardUnits::gather(size_t unit) {
  for (size_t f : flats_[unit]) reducer_.gather(f);
}

void FullShardUnits::release(size_t unit) {
  for (size_t f : flats_[unit]) reducer_.release(f);
}

}  // namespace acc::detail
