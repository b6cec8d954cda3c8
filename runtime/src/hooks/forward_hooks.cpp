#include <acc/hooks.h>

#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "hooks/hook_registry.h"

namespace acc {

namespace {

enum class Kind { kPre, kPost, kBackwardPre };

struct ModuleHooks {
  // Modules are keyed by address; a module a shared_ptr owns (every ModuleHolder's) is recognised
  // as gone when its pointer expired, so a new module at the same address starts without hooks.
  std::weak_ptr<torch::nn::Module> owner;
  bool owned = false;
  // Every hook is stored with the call's tensors as argument; backward pre-hooks get none.
  std::vector<std::pair<uint64_t, ModuleArgsHook>> pre, post, backward_pre;
  std::vector<std::pair<uint64_t, ModuleArgsHook>>& of(Kind kind) {
    return kind == Kind::kPre ? pre : kind == Kind::kPost ? post : backward_pre;
  }
  bool empty() const { return pre.empty() && post.empty() && backward_pre.empty(); }
};

// One guarded forward call that built autograd nodes: those numbered [first, end) on `thread`.
struct ForwardCall {
  uint64_t thread = 0;
  uint64_t first = 0;
  uint64_t end = 0;
  torch::nn::Module* module = nullptr;
  uint64_t fired_in = 0;  // the backward generation whose hooks ran; 0: none yet
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<const torch::nn::Module*, ModuleHooks> hooks;
  std::unordered_map<uint64_t, std::pair<const torch::nn::Module*, Kind>> handles;
  uint64_t next_handle = 1;
  std::vector<std::shared_ptr<ForwardCall>> calls;  // since the last backward started
  std::unordered_set<const torch::nn::Module*> checkpointed;
  uint64_t backward_generation = 0;
};

// Never destroyed: guards and autograd nodes may outlive static destruction at exit.
Registry& registry() {
  static auto* instance = new Registry;
  return *instance;
}

// The hooks of a live module; forgets those of a destroyed one. Called with the registry locked.
ModuleHooks* live_hooks(Registry& reg, const torch::nn::Module& module) {
  auto it = reg.hooks.find(&module);
  if (it == reg.hooks.end()) return nullptr;
  if (it->second.owned && it->second.owner.expired()) {
    reg.hooks.erase(it);
    return nullptr;
  }
  return &it->second;
}

// Modules whose guard is open on this thread: a nested guard of the same module runs nothing.
thread_local std::vector<const torch::nn::Module*> open_guards;

std::vector<ModuleArgsHook> hooks_of(const torch::nn::Module& module, Kind kind) {
  auto& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  std::vector<ModuleArgsHook> out;
  auto* hooks = live_hooks(reg, module);
  if (hooks == nullptr) return out;
  for (const auto& entry : hooks->of(kind)) out.push_back(entry.second);
  return out;
}

HookHandle add_hook(torch::nn::Module& module, ModuleArgsHook hook, Kind kind) {
  auto& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  const uint64_t id = reg.next_handle++;
  if (live_hooks(reg, module) == nullptr) {
    auto& entry = reg.hooks[&module];
    entry.owner = module.weak_from_this();
    entry.owned = !entry.owner.expired();
  }
  reg.hooks[&module].of(kind).emplace_back(id, std::move(hook));
  reg.handles.emplace(id, std::make_pair(&module, kind));
  return HookHandle(id);
}

// Once per forward call and backward: a retained graph's second backward runs them again.
void run_backward_pre_hooks(ForwardCall& call) {
  {
    auto& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    if (call.fired_in == reg.backward_generation) return;
    call.fired_in = reg.backward_generation;
  }
  ForwardArgs none;
  for (const auto& hook : hooks_of(*call.module, Kind::kBackwardPre)) hook(*call.module, none);
}

class CallPreHook : public torch::autograd::FunctionPreHook {
 public:
  explicit CallPreHook(std::shared_ptr<ForwardCall> call) : call_(std::move(call)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    run_backward_pre_hooks(*call_);
    return grads;
  }

 private:
  std::shared_ptr<ForwardCall> call_;
};

}  // namespace

void HookHandle::remove() {
  if (id_ == 0) return;
  auto& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.handles.find(id_);
  auto hooks = it == reg.handles.end() ? reg.hooks.end() : reg.hooks.find(it->second.first);
  if (hooks != reg.hooks.end()) {
    auto& list = hooks->second.of(it->second.second);
    list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& e) { return e.first == id_; }),
               list.end());
    if (hooks->second.empty()) reg.hooks.erase(hooks);
  }
  if (it != reg.handles.end()) reg.handles.erase(it);
  id_ = 0;
}

namespace {
ModuleArgsHook ignoring_args(ModuleHook hook) {
  return [hook = std::move(hook)](torch::nn::Module& module, ForwardArgs&) { hook(module); };
}
}  // namespace

HookHandle register_forward_pre_hook(torch::nn::Module& module, ModuleHook hook) {
  return add_hook(module, ignoring_args(std::move(hook)), Kind::kPre);
}
HookHandle register_forward_hook(torch::nn::Module& module, ModuleHook hook) {
  return add_hook(module, ignoring_args(std::move(hook)), Kind::kPost);
}
HookHandle register_forward_pre_hook(torch::nn::Module& module, ModuleArgsHook hook) {
  return add_hook(module, std::move(hook), Kind::kPre);
}
HookHandle register_forward_hook(torch::nn::Module& module, ModuleArgsHook hook) {
  return add_hook(module, std::move(hook), Kind::kPost);
}
HookHandle register_backward_pre_hook(torch::nn::Module& module, ModuleHook hook) {
  return add_hook(module, ignoring_args(std::move(hook)), Kind::kBackwardPre);
}

void ForwardHooksGuard::open(torch::nn::Module& module, std::initializer_list<at::Tensor*> inputs) {
  if (std::find(open_guards.begin(), open_guards.end(), &module) != open_guards.end()) return;
  {
    auto& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    if (live_hooks(reg, module) == nullptr) return;
  }
  args_.inputs.assign(inputs.begin(), inputs.end());  // only for hooked modules: no allocation otherwise
  for (const auto& hook : hooks_of(module, Kind::kPre)) hook(module, args_);
  module_ = &module;
  uncaught_ = std::uncaught_exceptions();
  open_guards.push_back(&module);
  first_node_ = at::sequence_number::peek();
}

ForwardHooksGuard::~ForwardHooksGuard() noexcept(false) { run_post_hooks(); }

at::Tensor& ForwardHooksGuard::close(at::Tensor& output) {
  args_.output = &output;
  run_post_hooks();
  return output;
}

void ForwardHooksGuard::run_post_hooks() {
  if (module_ == nullptr) return;
  auto* module = module_;
  module_ = nullptr;
  open_guards.erase(std::find(open_guards.begin(), open_guards.end(), module));
  const uint64_t end = at::sequence_number::peek();
  if (end != first_node_ && c10::GradMode::is_enabled()) {
    auto& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto* hooks = live_hooks(reg, *module);
    if (hooks != nullptr && !hooks->backward_pre.empty()) {
      auto call = std::make_shared<ForwardCall>();
      call->thread = at::RecordFunction::currentThreadId();
      call->first = first_node_;
      call->end = end;
      call->module = module;
      reg.calls.push_back(std::move(call));
    }
  }
  const bool unwinding = std::uncaught_exceptions() > uncaught_;
  for (const auto& hook : hooks_of(*module, Kind::kPost)) {
    if (!unwinding) {
      hook(*module, args_);
      continue;
    }
    try {
      hook(*module, args_);
    } catch (...) {  // the forward's own exception is the one to report
    }
  }
}

namespace detail {

bool has_module_hooks(const torch::nn::Module& module) {
  auto& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  return live_hooks(reg, module) != nullptr;
}

void set_checkpointed(const torch::nn::Module& module, bool checkpointed) {
  auto& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  if (checkpointed) {
    reg.checkpointed.insert(&module);
  } else {
    reg.checkpointed.erase(&module);
  }
}

bool is_checkpointed(const torch::nn::Module& module) {
  auto& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  return reg.checkpointed.count(&module) != 0;
}

void attach_backward_pre_hooks(const at::Tensor& root) {
  auto& reg = registry();
  std::vector<std::shared_ptr<ForwardCall>> calls;
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    ++reg.backward_generation;
    calls.swap(reg.calls);
  }
  // Nodes hooked before (a retained graph's second backward) keep their hooks.
  if (calls.empty() || !root.defined() || !root.grad_fn()) return;
  std::vector<torch::autograd::Node*> stack{root.grad_fn().get()};
  std::unordered_set<torch::autograd::Node*> seen{stack.front()};
  while (!stack.empty()) {
    auto* node = stack.back();
    stack.pop_back();
    const uint64_t seq = node->sequence_nr();
    const uint64_t thread = node->thread_id();
    std::shared_ptr<ForwardCall> innermost;
    for (const auto& call : calls) {
      if (call->thread != thread || seq < call->first || seq >= call->end) continue;
      if (!innermost || call->end - call->first < innermost->end - innermost->first) innermost = call;
    }
    if (innermost) node->add_pre_hook(std::make_unique<CallPreHook>(innermost));
    for (const auto& edge : node->next_edges()) {
      auto* next = edge.function.get();
      if (next != nullptr && seen.insert(next).second) stack.push_back(next);
    }
  }
}

}  // namespace detail
}  // namespace acc
