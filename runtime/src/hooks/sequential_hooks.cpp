// Sequential calls its children through AnyModule, so acc can put a module of its own in a child's
// place there: it opens the child's guard around the child's forward. Only the Sequential's list
// of AnyModules changes; the child stays registered under its name, so named_children(),
// parameters() and the state dict are what they were.
#include <acc/activation_checkpointing.h>
#include <acc/hooks.h>

#include <c10/util/Exception.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <stdexcept>
#include <string>

#include "hooks/hook_registry.h"

namespace acc {

namespace {

class HookedChildImpl : public torch::nn::Module {
 public:
  explicit HookedChildImpl(torch::nn::AnyModule child)
      : torch::nn::Module("acc::HookedChild"), child_(std::move(child)) {}

  torch::Tensor forward(torch::Tensor input) {
    if (detail::is_checkpointed(*child_.ptr())) {
      return checkpoint([this](const at::Tensor& x) { return call(x); }, input);
    }
    return call(std::move(input));
  }

 private:
  torch::Tensor call(torch::Tensor input) {
    auto& child = *child_.ptr();
    ForwardHooksGuard guard(child, input);
    try {
      auto output = child_.forward(input);
      return guard.close(output);
    } catch (const c10::Error& error) {
      const std::string what = error.what_without_backtrace();
      const bool signature = what.find("Expected argument") != std::string::npos ||
                             what.find("type of the return value") != std::string::npos;
      if (!signature) {
        throw;
      }
      throw std::invalid_argument(
          "acc: the Sequential child " + child.name() +
          " has hooks (an FSDP unit), and acc calls such children with one tensor and expects one "
          "back, but its forward takes or returns something else (" + what +
          "). Put `acc::ForwardHooksGuard forward_hooks(*this);` first in its forward instead, and "
          "call it from a module of your own rather than a Sequential");
    }
  }

  torch::nn::AnyModule child_;
};

}  // namespace

int hook_sequential(torch::nn::SequentialImpl& sequential) {
  int hooked = 0;
  for (auto& child : sequential) {
    if (child.type_info() == typeid(HookedChildImpl)) {
      ++hooked;
      continue;
    }
    if (!detail::has_module_hooks(*child.ptr())) continue;
    child = torch::nn::AnyModule(std::make_shared<HookedChildImpl>(std::move(child)));
    ++hooked;
  }
  return hooked;
}

}  // namespace acc
