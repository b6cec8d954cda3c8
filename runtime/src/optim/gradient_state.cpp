#include "optim/gradient_state.h"

#include <ATen/autocast_mode.h>

#include <algorithm>

namespace acc::detail {

namespace {
class AcceleratedOptimizerController : public OptimizerController {
 public:
  explicit AcceleratedOptimizerController(std::shared_ptr<GradientState> state)
      : state_(std::move(state)) {}

  bool before_step(torch::optim::Optimizer& optimizer) override {
    if (!state_->sync_gradients) return false;  // accumulating: not a skipped step
    state_->step_was_skipped.set(false);
    if (auto& scaler = state_->scaler) {
      scaler->unscale_(optimizer);  // no-op when clip_grad_norm_ already unscaled
      if (scaler->found_inf(optimizer)) {
        // torch's GradScaler.step + update: skip the step, back the scale off.
        scaler->update();
        state_->step_was_skipped.set(true);
        end_of_step();
        return false;
      }
    }
    return true;
  }
  // The kernel unscales and skips on the device; after_step's update() backs the scale off there.
  bool before_fused_step(torch::optim::Optimizer& optimizer, FusedStepScaling& scaling) override {
    if (!state_->sync_gradients) return false;
    state_->step_was_skipped.set(false);
    if (state_->scaler) {
      scaling = state_->scaler->fused_step_inputs(optimizer);
      if (scaling.found_inf) state_->step_was_skipped.set_pending(*scaling.found_inf);
    }
    return true;
  }
  void after_step(torch::optim::Optimizer&) override {
    if (state_->scaler) state_->scaler->update();
    end_of_step();
  }
  bool before_zero_grad(torch::optim::Optimizer&) override { return state_->sync_gradients; }
  bool step_was_skipped(const torch::optim::Optimizer&) const override {
    return state_->step_was_skipped.get();
  }

 private:
  // The parameters change (or were meant to): autocast's cached low-precision copies of them are
  // stale from here on.
  void end_of_step() {
    if (state_->autocast_active) at::autocast::clear_cache();
  }

 private:
  std::shared_ptr<GradientState> state_;
};

class AcceleratedSchedulerController : public SchedulerController {
 public:
  explicit AcceleratedSchedulerController(std::shared_ptr<GradientState> state)
      : state_(std::move(state)) {}

  int steps_for_this_call() override {
    if (!state_->step_scheduler_with_optimizer) return 1;
    // After a fused fp16 step this reads the device's flag (Accelerate's fused path cannot see the
    // skip at all, and steps the schedule anyway).
    if (!state_->sync_gradients || state_->step_was_skipped.get()) return 0;
    // The schedule counts batches of the unsharded loader; each prepared step consumed
    // num_processes of them (unless the batches themselves were split).
    return state_->split_batches || !state_->scheduler_steps_per_process ? 1 : state_->num_processes;
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

// Accelerate's GradientState._add_dataloader / _remove_dataloader.
void begin_dataloader(GradientState& state, const DataLoaderState* loader) {
  state.active_dataloaders.push_back(loader);
}

void end_dataloader(GradientState& state, const DataLoaderState* loader) {
  auto& active = state.active_dataloaders;
  active.erase(std::remove(active.begin(), active.end(), loader), active.end());
}

}  // namespace acc::detail
