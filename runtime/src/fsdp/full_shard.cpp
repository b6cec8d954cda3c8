#include "fsdp/full_shard.h"

#include <c10/core/GradMode.h>
#include <torch/nn/modules/container/sequential.h>

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <acc/errors.h>
#include <acc/warnings.h>

#include "fsdp/sharded_reducer.h"
#include "hooks/hook_registry.h"

namespace acc::detail {

namespace {
constexpr size_t kNone = static_cast<size_t>(-1);
}  // namespace

FullShardUnits::FullShardUnits(torch::nn::Module& model, ShardedReducer& reducer, std::vector<UnitModule> units,
                               const ResolvedFsdpPlugin& plugin)
    : reducer_(reducer),
      units_(std::move(units)),
      flats_(units_.size()),
      seen_(units_.size(), false),
      reshard_after_forward_(plugin.reshard_after_forward),
      backward_prefetch_(plugin.backward_prefetch),
      forward_prefetch_(plugin.forward_prefetch),
      next_in_backward_(units_.size(), kNone) {
  const bool activation_checkpointing = plugin.activation_checkpointing;
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
    handles_.push_back(register_backward_pre_hook(module, [this, u](torch::nn::Module&) { before_backward(u); }));
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
    const size_t unit = unit_of_flat[flat];
    if (!seen_[unit]) return;
    reducer_.release(flat);
    if (flat == flats_[unit].back()) after_unit_gradients(unit);
  });
}

void FullShardUnits::check_seams_once(bool as_error) {
  if (seams_checked_) return;
  seams_checked_ = true;
  std::map<std::string, std::vector<std::string>> unseen;  // by unit type: the units' paths
  for (size_t u = units_.size(); u-- > 0;)  // units_ lists the latest registered first
    if (!seen_[u] && !units_[u].path.empty()) unseen[units_[u].module->name()].push_back(units_[u].path);
  for (const auto& [qualified, paths] : unseen) {
    // The class as the user writes it in its own file (no namespace); TORCH_MODULE(Block) names the
    // holder Block and the class BlockImpl, and acc-migrate takes the holder.
    const auto colons = qualified.rfind("::");
    const std::string type = colons == std::string::npos ? qualified : qualified.substr(colons + 2);
    const bool impl = type.size() > 4 && type.compare(type.size() - 4, 4, "Impl") == 0;
    const std::string holder = impl ? type.substr(0, type.size() - 4) : type;
    std::string where;
    for (size_t i = 0; i < paths.size() && i < 3; ++i) where += (i ? ", " : "") + paths[i];
    if (paths.size() > 3) where += ", ...";
    const std::string message =
        std::string(as_error ? "acc: " : "acc: warning: ") + "FSDP FULL_SHARD: " + std::to_string(paths.size()) +
        " unit" + (paths.size() > 1 ? "s" : "") + " of type " + qualified + " (" + where +
        ") did not run the forward seam in the first training step, so their parameters stay whole on every "
        "rank and sharding saves no memory for them. Make `acc::ForwardHooksGuard forward_hooks(*this);` "
        "(<acc/hooks.h>) the first line of " + type + "::forward, or run `acc-migrate --fsdp-units=" + holder +
        "` on your sources (docs/fsdp.md). " +
        (as_error ? "This is an error because FullyShardedDataParallelPlugin().require_unit_seams(true) was given"
                  : "FullyShardedDataParallelPlugin().require_unit_seams(true) makes this an error");
    if (as_error) throw ConfigError(message);
    warn(message);
  }
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
  // Eval (no backward follows) and recomputations inside backward are not this step's order.
  if (!c10::GradMode::is_enabled() || recomputing_checkpoint()) return;
  if (backward_started_) {  // the first training forward of a new step
    previous_starts_ = std::move(starts_);
    starts_.clear();
    ends_.clear();
    backward_started_ = false;
  }
  starts_.push_back(unit);
  // The previous step called the same units in the same order up to here: the next one is known.
  const size_t at = starts_.size() - 1;
  if (forward_prefetch_ && at + 1 < previous_starts_.size() && previous_starts_[at] == unit) {
    prefetch(previous_starts_[at + 1]);
  }
}

void FullShardUnits::before_backward(size_t unit) {
  if (!backward_started_) {
    backward_started_ = true;
    cursor_ = ends_.size();
  }
  // Backward runs the forward calls in reverse order of their ends; find this call's.
  size_t at = cursor_;
  while (at > 0 && ends_[at - 1] != unit) --at;
  gather(unit);
  if (at == 0) return;  // a call this step's forward did not record (a recomputation)
  cursor_ = at - 1;
  const size_t next = at >= 2 ? ends_[at - 2] : kNone;
  if (backward_prefetch_ == BackwardPrefetch::BACKWARD_PRE) {
    if (next != kNone) prefetch(next);
  } else if (backward_prefetch_ == BackwardPrefetch::BACKWARD_POST) {
    next_in_backward_[unit] = next;
  }
}

void FullShardUnits::after_unit_gradients(size_t unit) {
  const size_t next = next_in_backward_[unit];
  next_in_backward_[unit] = kNone;
  if (next != kNone) prefetch(next);
}

void FullShardUnits::prefetch(size_t unit) {
  if (!seen_[unit]) return;
  for (size_t f : flats_[unit]) reducer_.prefetch(f);
}

void FullShardUnits::after_forward(size_t unit) {
  // The root's backward starts right after its forward, so it stays whole for it (as in torch);
  // without a graph (eval under NoGradGuard) no backward follows.
  if (recomputing_checkpoint()) return;  // its backward runs right after: stay whole for it
  const bool root = unit + 1 == units_.size() && units_[unit].path.empty();
  if (c10::GradMode::is_enabled() && !backward_started_) ends_.push_back(unit);
  if (reshard_after_forward_ && (!root || !c10::GradMode::is_enabled())) release(unit);
}

void FullShardUnits::gather(size_t unit) {
  for (size_t f : flats_[unit]) reducer_.gather(f);
}

void FullShardUnits::release(size_t unit) {
  for (size_t f : flats_[unit]) reducer_.release(f);
}

}  // namespace acc::detail
