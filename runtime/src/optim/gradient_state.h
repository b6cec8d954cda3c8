#pragma once
// State shared by an Accelerator and the optimizers and schedulers it prepared (Accelerate's
// GradientState), and the controllers that apply it at step().
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <acc/detail/data_loader_state.h>
#include <acc/grad_scaler.h>
#include <acc/optimizer.h>
#include <acc/scheduler.h>

namespace acc::detail {

/// Whether the last optimizer step was skipped for an fp16 overflow: known on the host after an
/// unfused step; after a fused one, the flag the kernel skipped on, read only when someone asks
/// (the read waits for the step), so that a step the host merely queues never waits for the device.
class SkippedStep {
 public:
  void set(bool skipped) {
    known_ = skipped;
    flag_ = at::Tensor();
  }
  void set_pending(at::Tensor flag) { flag_ = std::move(flag); }
  bool get() const {
    if (flag_.defined()) {
      known_ = flag_.item<float>() > 0;
      flag_ = at::Tensor();
    }
    return known_;
  }

 private:
  mutable bool known_ = false;
  mutable at::Tensor flag_;  // defined until read
};

struct GradientState {
  bool sync_gradients = true;      // false while accumulating (no optimizer step)
  SkippedStep step_was_skipped;    // the last optimizer step was skipped (fp16 overflow)
  int num_processes = 1;
  bool split_batches = false;
  bool step_scheduler_with_optimizer = true;
  bool scheduler_steps_per_process = true;

  // --- gradient accumulation and mixed precision (Accelerate's GradientState plugin_kwargs) ---
  int64_t num_steps = 1;            // gradient_accumulation_steps
  int64_t step = 0;                 // accumulate() calls since the last sync
  bool accumulate_entered = false;  // accumulate() ran at least once (else num_steps > 1 does nothing)
  bool sync_with_dataloader = true;
  bool sync_each_batch = false;
  /// Loss scaling for fp16 on CUDA; null otherwise.
  std::shared_ptr<GradScaler> scaler;
  /// autocast is active on the training thread, so its weight cache must be cleared each step.
  bool autocast_active = false;

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
