#include "parallel/gradient_sync.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace acc::detail {

class GradientSync::ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(GradientSync* sync, size_t index) : sync_(sync), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    sync_->gradient_ready(index_);
    return outputs;
  }

 private:
  GradientSync* sync_;
  size_t index_;
};

GradientSync::~GradientSync() { detach_hooks(); }

void GradientSync::attach_hooks(const std::vector<NamedTensor>& parameters) {
  for (size_t i = 0; i < parameters.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(parameters[i].tensor);
    hook_keys_.push_back(accumulator->add_post_hook(std::make_unique<ReadyHook>(this, i)));
    accumulators_.push_back(std::move(accumulator));
  }
}

void GradientSync::detach_hooks() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  accumulators_.clear();
  hook_keys_.clear();
}

void GradientSync::gradient_ready(size_t param) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_backward_) {
    in_backward_ = true;
    backward_syncs_ = require_sync_;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { end_backward(); });
  }
  if (backward_syncs_) {
    on_gradient_ready(param);
  } else {
    on_gradient_unsynced(param);  // no_sync / accumulating: the gradient stays in .grad
  }
}

void GradientSync::end_backward() {
  std::lock_guard<std::mutex> lock(mutex_);
  in_backward_ = false;
  if (backward_syncs_) {
    finish_backward();
  } else {
    finish_unsynced_backward();
  }
}

}  // namespace acc::detail
