#pragma once
// State shared by an Accelerator and the optimizers and schedulers it prepared (Accelerate's
// GradientState), and the controllers that apply it at step().
#include <memory>

#include <acc/optimizer.h>
#include <acc/scheduler.h>

namespace acc::detail {

struct GradientState {
  bool sync_gradients = true;      // false while accumulating (no optimizer step)
  bool step_was_skipped = false;   // the last optimizer step was skipped (fp16 overflow)
  int num_processes = 1;
  bool split_batches = false;
  bool step_scheduler_with_optimizer = true;
};

std::shared_ptr<OptimizerController> make_optimizer_controller(
    std::shared_ptr<GradientState> state);
std::shared_ptr<SchedulerController> make_scheduler_controller(
    std::shared_ptr<GradientState> state);

}  // namespace acc::detail
