#pragma once
// Dynamic loss scaling for fp16 training (torch.amp.GradScaler's algorithm, which libtorch's C++ API
// lacks): the loss is multiplied by a scale before backward so small fp16 gradients do not flush to
// zero; before the optimizer steps, gradients are unscaled and checked for inf/NaN; a step with
// non-finite gradients is skipped and the scale backs off, and after growth_interval clean steps
// the scale grows.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <map>

#include <acc/detail/fused_step_scaling.h>
#include <acc/options.h>

namespace acc {

class GradScaler {
 public:
  /// The scale lives on `device`, next to the gradients it checks.
  GradScaler(const GradScalerKwargs& options, c10::Device device);

  bool is_enabled() const { return options_.enabled(); }
  /// `loss * scale` (the loss itself when disabled).
  at::Tensor scale(const at::Tensor& loss) const;
  /// Divides the gradients of `optimizer`'s parameters by the scale, once per step, and records
  /// whether any is inf or NaN. Later calls before update() do nothing.
  void unscale_(torch::optim::Optimizer& optimizer);
  /// Under FSDP each rank unscales only its shard of the gradients: `reduce` turns unscale_'s
  /// found-inf flag (a float tensor [1]) into the maximum over the ranks, so that every rank
  /// skips the same steps.
  void set_found_inf_reduction(std::function<void(at::Tensor&)> reduce) { reduce_found_inf_ = std::move(reduce); }
  /// True when unscale_ found inf or NaN in `optimizer`'s gradients since the last update(). Reads
  /// the flag on the host: waits for the device.
  bool found_inf(const torch::optim::Optimizer& optimizer) const;
  /// For a fused step, in place of unscale_ and found_inf (torch's GradScaler.step for optimizers
  /// that take `grad_scale` and `found_inf`): checks the still-scaled gradients for inf/NaN and hands
  /// the kernel the scale to divide them by and the flag to skip on; nothing is read on the host.
  /// After unscale_ (clip_grad_norm_) the kernel gets the flag only. Empty when disabled.
  FusedStepScaling fused_step_inputs(torch::optim::Optimizer& optimizer);
  /// Backs off after a step with non-finite gradients, grows after growth_interval clean steps,
  /// and forgets which optimizers were unscaled.
  void update();

  double get_scale() const;
  int64_t growth_tracker() const;
  /// For checkpoints: restores what get_scale() and growth_tracker() returned.
  void load(double scale, int64_t growth_tracker);

 private:
  /// unscale_'s pass: gradients times `inv_scale`, and the inf/NaN flag over them (all ranks').
  at::Tensor check_and_unscale(torch::optim::Optimizer& optimizer, const at::Tensor& inv_scale);

  GradScalerKwargs options_;
  at::Tensor scale_;           // float32 [1]
  at::Tensor growth_tracker_;  // int32 [1]
  std::map<const torch::optim::Optimizer*, at::Tensor> found_inf_;  // per unscaled optimizer
  std::function<void(at::Tensor&)> reduce_found_inf_;
};

}  // namespace acc
