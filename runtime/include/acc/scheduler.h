#pragma once
// acc::Scheduler<S>: the user's own libtorch scheduler type whose step() follows Accelerate's
// AcceleratedScheduler: nothing while gradients accumulate or after a skipped optimizer step,
// otherwise one step per process (unless split_batches), because the schedule was sized for the
// unsharded data loader. Unprepared it behaves exactly like S.
#include <memory>
#include <utility>

namespace acc {

/// Decides how many times a prepared scheduler steps for one step() call.
class SchedulerController {
 public:
  virtual ~SchedulerController() = default;
  virtual int steps_for_this_call() = 0;
};

/// The non-template part of every acc::Scheduler<S>, so that prepare() recognises them all.
class PreparedSchedulerBase {
 public:
  bool is_prepared() const { return controller_ != nullptr; }
  void attach_controller(std::shared_ptr<SchedulerController> controller) {
    controller_ = std::move(controller);
  }

 protected:
  ~PreparedSchedulerBase() = default;
  std::shared_ptr<SchedulerController> controller_;
};

template <typename S>
class Scheduler : public S, public PreparedSchedulerBase {
 public:
  using S::S;

  /// Forwards to S::step with whatever arguments S takes (ReduceLROnPlateauScheduler: a metric).
  template <typename... Args>
  void step(Args&&... args) {
    const int steps = controller_ ? controller_->steps_for_this_call() : 1;
    for (int i = 0; i < steps; ++i) S::step(args...);
  }
};

}  // namespace acc
