#pragma once
// State shared by an Accelerator and the optimizers and schedulers it prepared (Accelerate's
// GradientState), and the controllers that apply it at step().
#include <cstdint>
#include <memory>
#include <vector>

#include <acc/data_loader_state.h>
#include <acc/optimizer.h>
#include <acc/scheduler.h>

namespace acc::detail {

struct GradientState {
  bool sync_gradients = true;      // false while accumulating (no optimizer step)
  bool step_was_skipped = false;   // the last optimizer step was skipped (fp16 overflow)
  int num_processes = 1;
  bool split_batches = false;
  bool step_scheduler_with_optimizer = true;

  // --- prepared data loaders (Accelerate's dataloader_references / active_dataloader) ---
  /// Loaders being iterated, innermost last: an evaluation loop inside a training loop sees its
  /// own loader's end and remainder, and the training loader's again once it ends.
  std::vector<const DataLoaderState*> active_dataloaders;

  bool in_dataloader() const { return !active_dataloaders.empty(); }
  /// The innermost active loader is processing its last batch of the epoch.
  bool end_of_dataloader() const {
    return in_dataloader() && active_dataloaders.back()->end_of_dataloader;
  }
  /// Real samples in the innermost loader's last global batch (dataset size % total batch
  /// size); -1 outside a loader, with drop_last, or for a dataset without a size.
  int64_t remainder() const { return in_dataloader() ? active_dataloaders.back()->remainder : -1; }
};

std::shared_ptr<OptimizerController> make_optimizer_controller(
    std::shared_ptr<GradientState> state);
std::shared_ptr<SchedulerController> make_scheduler_controller(
    std::shared_ptr<GradientState> state);

}  // namespace acc::detail
