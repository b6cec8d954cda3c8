#pragma once
// The forward seam: module-level hooks around a module's forward, which C++ modules lack (Python's
// Module.__call__ runs them; libtorch calls forward() directly). FSDP FULL_SHARD gathers a unit's
// parameters before its forward and releases them after; big-model inference moves weights and
// inputs the same way. See docs/hooks.md.
//
// Hooks run where acc sees the call:
// - children of torch::nn::Sequential that acc has hooked (acc::hook_sequential; FSDP does it at
//   prepare), since Sequential calls them through AnyModule;
// - any module whose forward starts with the guard, one line per module type:
//
//     torch::Tensor BlockImpl::forward(torch::Tensor x) {
//       acc::ForwardHooksGuard forward_hooks(*this);
//       ...
//
// Hooks of a module called where neither applies do not run.
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <type_traits>
#include <vector>

namespace at {
class Tensor;
}
namespace torch::nn {
class Module;
class SequentialImpl;
}  // namespace torch::nn

namespace acc {

/// A hook's argument is the module whose forward runs.
using ModuleHook = std::function<void(torch::nn::Module&)>;

/// The tensors of one forward call that acc sees, for hooks that move them (big-model dispatch
/// moves inputs to the module's device): the input a Sequential passes to a hooked child, or the
/// tensors a guard was given; after the forward, the output when acc sees it (a Sequential child's,
/// or one passed to ForwardHooksGuard::close). Hooks may replace them. Empty where acc sees none.
struct ForwardArgs {
  std::vector<at::Tensor*> inputs;
  at::Tensor* output = nullptr;
};
using ModuleArgsHook = std::function<void(torch::nn::Module&, ForwardArgs&)>;

/// Returned by the register functions (Python's RemovableHandle): remove() unregisters the hook.
/// Dropping the handle keeps the hook.
class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(uint64_t id) : id_(id) {}
  void remove();

 private:
  uint64_t id_ = 0;
};

/// Hooks belong to the module object: one a shared_ptr owns (every ModuleHolder's) drops them when
/// it is destroyed; remove the hooks of any other module before it goes.
///
/// Runs before `module`'s forward, in registration order.
HookHandle register_forward_pre_hook(torch::nn::Module& module, ModuleHook hook);
/// Runs after `module`'s forward returned (also when it threw; then an exception the hook throws
/// is dropped), in registration order.
HookHandle register_forward_hook(torch::nn::Module& module, ModuleHook hook);
/// The same, with the call's tensors (ForwardArgs).
HookHandle register_forward_pre_hook(torch::nn::Module& module, ModuleArgsHook hook);
HookHandle register_forward_hook(torch::nn::Module& module, ModuleArgsHook hook);
/// Runs before the first autograd node of what `module`'s forward computed executes in a backward
/// started by Accelerator::backward (once per forward call that built a graph). Python's
/// register_full_backward_pre_hook, without the gradients.
HookHandle register_backward_pre_hook(torch::nn::Module& module, ModuleHook hook);

/// RAII seam as the first line of a module's forward: runs the module's forward pre-hooks now and
/// its forward hooks when the scope ends, and marks the autograd nodes built in between as the
/// module's. Costs one hash lookup for a module without hooks. Nested guards of the same module
/// (a Sequential child that also has the line) run the hooks once.
///
/// Given the forward's tensor arguments too, hooks may replace them before the body uses them
/// (big-model dispatch moves them to the module's execution device):
///
///     torch::Tensor BlockImpl::forward(torch::Tensor x, torch::Tensor mask) {
///       acc::ForwardHooksGuard forward_hooks(*this, x, mask);
///       ...
///       return forward_hooks.close(y);  // optional: lets forward hooks see and move the output
class ForwardHooksGuard {
 public:
  explicit ForwardHooksGuard(torch::nn::Module& module) { open(module, {}); }
  template <typename... Tensors, typename = std::enable_if_t<(sizeof...(Tensors) > 0)>>
  ForwardHooksGuard(torch::nn::Module& module, Tensors&... inputs) {
    static_assert((std::is_same_v<Tensors, at::Tensor> && ...),
                  "ForwardHooksGuard takes the forward's torch::Tensor arguments (by reference)");
    open(module, {&inputs...});
  }
  ~ForwardHooksGuard() noexcept(false);
  ForwardHooksGuard(const ForwardHooksGuard&) = delete;
  ForwardHooksGuard& operator=(const ForwardHooksGuard&) = delete;

  /// Runs the forward hooks now with `output` visible to them, and returns it (possibly replaced
  /// by a hook); the destructor then runs nothing.
  at::Tensor& close(at::Tensor& output);

 private:
  void open(torch::nn::Module& module, std::initializer_list<at::Tensor*> inputs);
  void run_post_hooks();
  torch::nn::Module* module_ = nullptr;  // null: nothing to run at exit
  int uncaught_ = 0;
  uint64_t first_node_ = 0;
  ForwardArgs args_;
};

/// Makes `sequential`'s children that have hooks now run them when the Sequential calls them. In
/// place: the Sequential's list of callees gets an acc module in each such child's place, which
/// opens the child's guard around its forward (so those children must take and return one
/// tensor; others need the guard line). named_children(), parameters() and the state dict do not
/// change; sequential[i] / ptr(i) return the acc module for a hooked child. Idempotent; returns
/// how many children are hooked.
int hook_sequential(torch::nn::SequentialImpl& sequential);

}  // namespace acc
