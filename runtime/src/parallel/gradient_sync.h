#pragma once
// What DDP's reducer (ddp/reducer.h) and FSDP's (fsdp/sharded_reducer.h) share: a post-hook on each
// parameter's gradient accumulator, one end-of-backward callback per backward pass, and the switch
// that no_sync() and accumulate() turn off.
#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/function.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace acc::detail {

struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

class GradientSync {
 public:
  virtual ~GradientSync();
  GradientSync() = default;
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  /// False inside no_sync(): gradients accumulate locally and nothing is communicated.
  void set_require_sync(bool value) { require_sync_ = value; }
  bool require_sync() const { return require_sync_; }

 protected:
  /// Hooks each parameter's gradient accumulator (after the model reached its device and dtype:
  /// changing either replaces the accumulator). The variable holds its accumulator only weakly;
  /// keeping it here keeps the hooks alive.
  void attach_hooks(const std::vector<NamedTensor>& parameters);
  /// Removes the hooks; derived destructors call it before their members go.
  void detach_hooks();

  /// Parameter `param`'s gradient is accumulated (only while require_sync()); called with the
  /// lock held. The first call of a backward pass has queued finish_backward().
  virtual void on_gradient_ready(size_t param) = 0;
  /// At the end of the backward pass that called on_gradient_ready, with the lock held.
  virtual void finish_backward() = 0;
  /// The same two inside no_sync(), where nothing is communicated: the gradient stays in .grad.
  virtual void on_gradient_unsynced(size_t /*param*/) {}
  virtual void finish_unsynced_backward() {}

 private:
  class ReadyHook;
  void gradient_ready(size_t param);
  void end_backward();

  bool require_sync_ = true;
  bool in_backward_ = false;
  bool backward_syncs_ = true;  // require_sync_ when the current backward started
  std::mutex mutex_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
};

}  // namespace acc::detail
