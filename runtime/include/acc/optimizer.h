#pragma once
// acc::Optimizer<Opt>: the user's own libtorch optimizer type, with acc's logic at step() and
// zero_grad(). Objects keep their types (DESIGN.md): prepare() cannot replace the user's
// optimizer, so the declaration names acc::Optimizer<torch::optim::Adam> once and everything else
// (constructors, options, param_groups, state, torch::save) is Opt's. Unprepared it behaves
// exactly like Opt.
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include <acc/detail/fused_step_scaling.h>

namespace acc {

namespace detail {
/// Whether fused_step knows `optimizer`'s type (torch::optim::Adam, AdamW, SGD or a subclass).
bool has_fused_step(const torch::optim::Optimizer& optimizer);
/// One step through ATen's fused kernels, on libtorch's own state fields (optim/fused_step.cpp).
void fused_step(torch::optim::Optimizer& optimizer, const FusedStepScaling& scaling = {});
/// Writes the step counts the fused kernels kept on the device into libtorch's integer `step`
/// fields, where the device may have skipped steps the host counted (optim/device_step.h).
void write_back_step_counts(torch::optim::Optimizer& optimizer);
/// ConfigError: this optimizer type has no fused kernel.
[[noreturn]] void throw_no_fused_kernel();
}  // namespace detail

/// What an Accelerator decides at the optimizer's step() and zero_grad(): the seam where gradient
/// accumulation, loss scaling and sharded updates plug in.
class OptimizerController {
 public:
  virtual ~OptimizerController() = default;
  /// False skips the step (accumulating, or inf/NaN gradients under fp16).
  virtual bool before_step(torch::optim::Optimizer& optimizer) = 0;
  /// before_step for a fused step: false skips it (accumulating); a loss scaler fills `scaling`
  /// instead of reading its inf/NaN check on the host, and the kernel skips on the device. The
  /// default is before_step; a controller that wraps another must forward this call too.
  virtual bool before_fused_step(torch::optim::Optimizer& optimizer, FusedStepScaling& scaling) {
    (void)scaling;
    return before_step(optimizer);
  }
  virtual void after_step(torch::optim::Optimizer& optimizer) = 0;
  /// Runs the update of a step without a closure: `update` is Opt::step. The default calls it
  /// once; FSDP calls it once per unit (with the groups cut to that unit) so that each unit's
  /// parameter all-gather overlaps the next unit's update.
  virtual torch::Tensor run_step(torch::optim::Optimizer& optimizer, const std::function<torch::Tensor()>& update) {
    (void)optimizer;
    return update();
  }
  /// False keeps the gradients (accumulating).
  virtual bool before_zero_grad(torch::optim::Optimizer& optimizer) = 0;
  /// True when the last step was skipped for inf/NaN gradients (not while accumulating). After a
  /// fused step under a loss scaler this reads the device's flag: it waits for the step.
  virtual bool step_was_skipped(const torch::optim::Optimizer& optimizer) const = 0;
};

/// The non-template part of every acc::Optimizer<Opt>, so that prepare() recognises them all.
class PreparedOptimizerBase {
 public:
  bool is_prepared() const { return controller_ != nullptr; }
  /// Called by Accelerator::prepare.
  void attach_controller(std::shared_ptr<OptimizerController> controller) {
    controller_ = std::move(controller);
  }

 protected:
  ~PreparedOptimizerBase() = default;
  std::shared_ptr<OptimizerController> controller_;
};

template <typename Opt>
class Optimizer : public Opt, public PreparedOptimizerBase {
  static_assert(std::is_base_of_v<torch::optim::Optimizer, Opt>,
                "acc::Optimizer<Opt>: Opt must derive from torch::optim::Optimizer");

 public:
  using Opt::Opt;

  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override {
    FusedStepScaling scaling;
    if (controller_ && !(fused_ ? controller_->before_fused_step(*this, scaling) : controller_->before_step(*this))) {
      return {};
    }
    // A closure re-evaluates the model: only Opt::step may call it, once.
    auto update = [this, &scaling]() -> torch::Tensor {
      if (!fused_) return Opt::step(nullptr);
      detail::fused_step(*this, scaling);
      return {};
    };
    torch::Tensor loss;
    if (closure) {
      if (fused_) {
        torch::AutoGradMode grad_mode(true);
        loss = closure();
        update();
      } else {
        loss = Opt::step(std::move(closure));
      }
    } else {
      loss = controller_ ? controller_->run_step(*this, update) : update();
    }
    if (controller_) controller_->after_step(*this);
    return loss;
  }

  /// Hides Opt::zero_grad (not virtual in libtorch): called through this type, it keeps the
  /// gradients while the controller says they are still accumulating.
  void zero_grad(bool set_to_none = true) {
    if (controller_ && !controller_->before_zero_grad(*this)) return;
    Opt::zero_grad(set_to_none);
  }

  /// True when the last step() was skipped because fp16 gradients overflowed (Accelerate's
  /// optimizer.step_was_skipped); steps left out while accumulating do not count. After a fused
  /// step this reads the flag the kernel used on the device: it waits for the step to finish.
  bool step_was_skipped() const { return controller_ && controller_->step_was_skipped(*this); }

  /// Python's `fused=True`: step() runs ATen's fused kernel (_fused_adam_, _fused_adamw_,
  /// _fused_sgd_) once per parameter group, device and dtype instead of libtorch's loop of kernels
  /// per parameter; same options, same state fields (checkpoints and FSDP shards work unchanged),
  /// results equal to about 1e-7 (the kernels round differently, e.g. lerp for Adam's moving
  /// average). Off by default, as in Python. Adam, AdamW and SGD only: ConfigError for another type.
  /// The step counts live on the device while fused (as torch's do); libtorch's integer `step` is
  /// brought up to date whenever acc saves or reads the state and when fused is turned off.
  Optimizer& fused(bool enabled) {
    if (enabled && !detail::has_fused_step(*this)) detail::throw_no_fused_kernel();
    if (fused_ && !enabled) detail::write_back_step_counts(*this);
    fused_ = enabled;
    return *this;
  }
  bool fused() const { return fused_; }

 private:
  bool fused_ = false;
};

}  // namespace acc
