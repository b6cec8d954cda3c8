#include "fsdp/sharded_optimizer.h"

#include <torch/optim/lbfgs.h>

#include <algorithm>
#include <sstream>
#include <tuple>
#include <type_traits>

#include <acc/errors.h>

#include "fsdp/sharded_reducer.h"
#include "optim/optimizer_state_fields.h"

namespace acc::detail {

namespace {
std::string shape_of(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}
}  // namespace

OptimizerLayout unsharded_layout(const torch::optim::Optimizer& optimizer) {
  OptimizerLayout layout;
  for (const auto& group : optimizer.param_groups()) {
    auto& slots = layout.emplace_back();
    for (const auto& param : group.params()) slots.push_back({param, param, 0, param.numel(), nullptr, 0});
  }
  return layout;
}

namespace {
// State an optimizer created before its first step (Adagrad's accumulators), or none.
bool has_stepped(torch::optim::Optimizer& optimizer) {
  for (auto& [key, state] : optimizer.state()) {
    const auto fields = fields_of(*state);
    if (fields.step == nullptr || *fields.step != 0) return true;
  }
  return false;
}

// `state` of a whole parameter, cut to elements [begin, end) of it.
std::unique_ptr<torch::optim::OptimizerParamState> slice_state(torch::optim::OptimizerParamState& state,
                                                               int64_t begin, int64_t end) {
  auto sliced = state.clone();
  for (auto& [field, slot] : fields_of(*sliced).tensors) {
    if (slot->defined()) *slot = slot->reshape({-1}).narrow(0, begin, end - begin).clone();
  }
  return sliced;
}
}  // namespace

ShardedOptimizer shard_optimizer(torch::optim::Optimizer& optimizer,
                                 const std::vector<ShardedReducer*>& reducers) {
  if (dynamic_cast<torch::optim::LBFGS*>(&optimizer) != nullptr) {
    throw ConfigError("acc: FSDP SHARD_GRAD_OP steps each rank's shard of the parameters, but LBFGS "
                      "needs whole parameter tensors (its update is not element-wise). Use an "
                      "element-wise optimizer (SGD, Adam, AdamW, Adagrad, RMSprop), or "
                      "FSDP_SHARDING_STRATEGY=NO_SHARD");
  }
  if (has_stepped(optimizer)) {
    throw ConfigError("acc: under FSDP SHARD_GRAD_OP the optimizer must be prepared before its first "
                      "step (its state is created for the local shard only); call "
                      "accelerator.prepare(model, optimizer) before training");
  }
  ShardedOptimizer out;
  auto& state = optimizer.state();
  std::remove_reference_t<decltype(state)> sharded_state;
  for (auto& group : optimizer.param_groups()) {
    std::vector<at::Tensor> sharded;
    auto& slots = out.layout.emplace_back();
    for (const auto& param : group.params()) {
      OptimizerSlot slot{param, param, 0, param.numel(), nullptr, 0};
      for (auto* reducer : reducers) {
        if (auto index = reducer->index_of(param)) {
          bool found = false;
          slot.reducer = reducer;
          slot.index = *index;
          slot.local = reducer->local_piece(param, &found);
          std::tie(slot.begin, slot.end) = reducer->piece_range(*index);
          break;
        }
      }
      if (slot.reducer == nullptr && param.requires_grad()) {
        throw ConfigError("acc: the optimizer holds a trainable parameter of shape " +
                          shape_of(param) + " that is in no prepared model. Under FSDP prepare "
                          "the model before the optimizer (accelerator.prepare(model, optimizer)), "
                          "and build the optimizer from the model's parameters");
      }
      // Frozen parameters stay whole: they never have a gradient and never change.
      auto existing = state.find(param.unsafeGetTensorImpl());
      if (slot.local.defined()) {
        sharded.push_back(slot.local);
        if (existing != state.end()) {
          sharded_state[slot.local.unsafeGetTensorImpl()] =
              slot.reducer ? slice_state(*existing->second, slot.begin, slot.end) : std::move(existing->second);
        }
      }
      if (slot.reducer != nullptr && std::find(out.reducers.begin(), out.reducers.end(), slot.reducer) ==
                                         out.reducers.end()) {
        out.reducers.push_back(slot.reducer);
      }
      slots.push_back(std::move(slot));
    }
    group.params() = std::move(sharded);
  }
  state = std::move(sharded_state);
  return out;
}

namespace {
class ShardedOptimizerController : public OptimizerController {
 public:
  ShardedOptimizerController(std::shared_ptr<OptimizerController> inner,
                             std::vector<ShardedReducer*> reducers)
      : inner_(std::move(inner)), reducers_(std::move(reducers)) {}

  bool before_step(torch::optim::Optimizer& optimizer) override {
    return inner_->before_step(optimizer);
  }
  bool before_fused_step(torch::optim::Optimizer& optimizer, FusedStepScaling& scaling) override {
    return inner_->before_fused_step(optimizer, scaling);
  }

  // One unit at a time: the groups are cut to the unit's pieces, Opt::step updates them, and the
  // unit's all-gather runs while the next unit is updated. Equivalent to one Opt::step for the
  // optimizers whose state and update are per parameter (acc knows which: the others, possibly
  // counting calls, step once and gather afterwards).
  torch::Tensor run_step(torch::optim::Optimizer& optimizer, const std::function<torch::Tensor()>& update) override {
    if (!new_param_state(optimizer)) return update();
    auto& groups = optimizer.param_groups();
    std::vector<std::vector<at::Tensor>> all;
    for (auto& group : groups) all.push_back(group.params());
    struct Restore {
      std::vector<torch::optim::OptimizerParamGroup>& groups;
      std::vector<std::vector<at::Tensor>>& all;
      ~Restore() {
        for (size_t g = 0; g < groups.size(); ++g) groups[g].params() = all[g];
      }
    } restore{groups, all};
    torch::Tensor loss;
    for (auto* reducer : reducers_) {
      for (size_t u = 0; u < reducer->units().size(); ++u) {
        bool any = false;
        for (size_t g = 0; g < groups.size(); ++g) {
          std::vector<at::Tensor> in_unit;
          for (const auto& param : all[g]) {
            if (reducer->unit_of_piece(param) == u) in_unit.push_back(param);
          }
          any = any || !in_unit.empty();
          groups[g].params() = std::move(in_unit);
        }
        if (any) loss = update();
        reducer->launch_parameter_gather(u);  // every rank, pieces or not: it is a collective
      }
    }
    gathered_ = true;
    return loss;
  }

  void after_step(torch::optim::Optimizer& optimizer) override {
    for (auto* reducer : reducers_) {
      if (gathered_) {
        reducer->wait_parameter_gathers();
      } else {
        reducer->all_gather_parameters();
      }
    }
    gathered_ = false;
    inner_->after_step(optimizer);
  }
  bool before_zero_grad(torch::optim::Optimizer& optimizer) override {
    return inner_->before_zero_grad(optimizer);
  }
  bool step_was_skipped(const torch::optim::Optimizer& optimizer) const override {
    return inner_->step_was_skipped(optimizer);
  }

 private:
  std::shared_ptr<OptimizerController> inner_;
  std::vector<ShardedReducer*> reducers_;
  bool gathered_ = false;  // run_step launched every unit's all-gather
};
}  // namespace

std::shared_ptr<OptimizerController> make_sharded_optimizer_controller(
    std::shared_ptr<OptimizerController> inner, std::vector<ShardedReducer*> reducers) {
  return std::make_shared<ShardedOptimizerController>(std::move(inner), std::move(reducers));
}

}  // namespace acc::detail
