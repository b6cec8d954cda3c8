#include "gradient_state.h"

namespace acc::detail {

namespace {
class AcceleratedOptimizerController : public OptimizerController {
 public:
  explicit AcceleratedOptimizerController(std::shared_ptr<GradientState> state)
      : state_(std::move(state)) {}

  bool before_step(torch::optim::Optimizer&) override {
    if (!state_->sync_gradients) return false;
    state_->step_was_skipped = false;
    return true;
  }
  void after_step(torch::optim::Optimizer&) override {}
  bool before_zero_grad(torch::optim::Optimizer&) override { return state_->sync_gradients; }

 private:
  std::shared_ptr<GradientState> state_;
};

class AcceleratedSchedulerController : public SchedulerController {
 public:
  explicit AcceleratedSchedulerController(std::shared_ptr<GradientState> state)
      : state_(std::move(state)) {}

  int steps_for_this_call() override {
    if (!state_->step_scheduler_with_optimizer) return 1;
    if (!state_->sync_gradients || state_->step_was_skipped) return 0;
    // The schedule counts batches of the unsharded loader; each prepared step consumed
    // num_processes of them (unless the batches themselves were split).
    return state_->split_batches ? 1 : state_->num_processes;
  }

 private:
  std::shared_ptr<GradientState> state_;
};
}  // namespace

std::shared_ptr<OptimizerController> make_optimizer_controller(
    std::shared_ptr<GradientState> state) {
  return std::make_shared<AcceleratedOptimizerController>(std::move(state));
}

std::shared_ptr<SchedulerController> make_scheduler_controller(
    std::shared_ptr<GradientState> state) {
  return std::make_shared<AcceleratedSchedulerController>(std::move(state));
}

}  // namespace acc::detail
