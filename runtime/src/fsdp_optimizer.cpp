#include "fsdp_optimizer.h"

#include <torch/optim/lbfgs.h>

#include <algorithm>
#include <sstream>

#include <acc/errors.h>

#include "fsdp_reducer.h"

namespace acc::detail {

namespace {
std::string shape_of(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}
}  // namespace

std::vector<ShardedReducer*> shard_optimizer(torch::optim::Optimizer& optimizer,
                                             const std::vector<ShardedReducer*>& reducers) {
  if (dynamic_cast<torch::optim::LBFGS*>(&optimizer) != nullptr) {
    throw ConfigError("acc: FSDP SHARD_GRAD_OP steps each rank's shard of the parameters, but LBFGS "
                      "needs whole parameter tensors (its update is not element-wise). Use an "
                      "element-wise optimizer (SGD, Adam, AdamW, Adagrad, RMSprop), or "
                      "FSDP_SHARDING_STRATEGY=NO_SHARD");
  }
  if (!optimizer.state().empty()) {
    throw ConfigError("acc: under FSDP SHARD_GRAD_OP the optimizer must be prepared before its first "
                      "step (its state is created for the local shard only); call "
                      "accelerator.prepare(model, optimizer) before training");
  }
  std::vector<ShardedReducer*> used;
  for (auto& group : optimizer.param_groups()) {
    std::vector<at::Tensor> sharded;
    for (const auto& param : group.params()) {
      bool found = false;
      at::Tensor piece;
      ShardedReducer* owner = nullptr;
      for (auto* reducer : reducers) {
        piece = reducer->local_piece(param, &found);
        if (found) {
          owner = reducer;
          break;
        }
      }
      if (!found) {
        if (param.requires_grad()) {
          throw ConfigError("acc: the optimizer holds a trainable parameter of shape " +
                            shape_of(param) + " that is in no prepared model. Under FSDP prepare "
                            "the model before the optimizer (accelerator.prepare(model, optimizer)), "
                            "and build the optimizer from the model's parameters");
        }
        sharded.push_back(param);  // frozen: never has a gradient, never changes
        continue;
      }
      if (std::find(used.begin(), used.end(), owner) == used.end()) used.push_back(owner);
      if (piece.defined()) sharded.push_back(piece);
    }
    group.params() = std::move(sharded);
  }
  return used;
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
  void after_step(torch::optim::Optimizer& optimizer) override {
    for (auto* reducer : reducers_) reducer->all_gather_parameters();
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
};
}  // namespace

std::shared_ptr<OptimizerController> make_sharded_optimizer_controller(
    std::shared_ptr<OptimizerController> inner, std::vector<ShardedReducer*> reducers) {
  return std::make_shared<ShardedOptimizerController>(std::move(inner), std::move(reducers));
}

}  // namespace acc::detail
