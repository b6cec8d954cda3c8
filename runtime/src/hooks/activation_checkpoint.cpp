// acc::checkpoint. The function runs once with grad mode on, only to learn which leaves (parameters)
// it uses; that graph and its activations are dropped at once. A node of acc's own stands for the
// piece in the real graph, with edges to the inputs and to those leaves: in backward it recomputes
// the piece and hands the gradients out along the edges, so the leaves' gradient accumulators (and
// the DDP/FSDP hooks on them) run in the outer backward. A reentrant backward that accumulated into
// the parameters itself would run those hooks, and their end-of-backward callbacks, inside the
// inner graph task.
#include <acc/activation_checkpointing.h>

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "hooks/hook_registry.h"

namespace acc {

namespace {

thread_local int recomputations = 0;

struct Recomputing {
  Recomputing() { ++recomputations; }
  ~Recomputing() { --recomputations; }
};

using Function = std::function<at::Tensor(const std::vector<at::Tensor>&)>;

// The random states of the CPU and of every other device the inputs are on.
class RandomStates {
 public:
  explicit RandomStates(const std::vector<at::Tensor>& inputs) {
    save(at::Device(at::kCPU));
    for (const auto& input : inputs) {
      if (input.defined() && !input.is_cpu() && states_.count(input.device().str()) == 0) save(input.device());
    }
  }
  void restore() const {
    for (const auto& [name, saved] : states_) {
      auto generator = at::globalContext().defaultGenerator(saved.first);
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(saved.second);
    }
  }

 private:
  void save(at::Device device) {
    auto generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    states_.insert_or_assign(device.str(), std::make_pair(device, generator.get_state()));
  }
  std::map<std::string, std::pair<at::Device, at::Tensor>> states_;
};

std::vector<at::Tensor> detached_like(const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> out;
  for (const auto& input : inputs) {
    out.push_back(input.defined() ? input.detach().requires_grad_(input.requires_grad()) : input);
  }
  return out;
}

// The leaves `output` depends on, other than `inputs` (the parameters the function used).
std::vector<at::Tensor> leaves_of(const at::Tensor& output, const std::vector<at::Tensor>& inputs) {
  std::unordered_set<const void*> skip;
  for (const auto& input : inputs) {
    if (input.defined()) skip.insert(input.unsafeGetTensorImpl());
  }
  std::vector<at::Tensor> leaves;
  std::vector<torch::autograd::Node*> stack{output.grad_fn().get()};
  std::unordered_set<torch::autograd::Node*> seen{stack.front()};
  while (!stack.empty()) {
    auto* node = stack.back();
    stack.pop_back();
    if (auto* accumulate = dynamic_cast<torch::autograd::AccumulateGrad*>(node)) {
      if (skip.insert(accumulate->variable.unsafeGetTensorImpl()).second) leaves.push_back(accumulate->variable);
    }
    for (const auto& edge : node->next_edges()) {
      auto* next = edge.function.get();
      if (next != nullptr && seen.insert(next).second) stack.push_back(next);
    }
  }
  return leaves;
}

class CheckpointBackward : public torch::autograd::Node {
 public:
  CheckpointBackward(Function function, std::vector<at::Tensor> inputs, std::vector<at::Tensor> leaves,
                     RandomStates random)
      : function_(std::move(function)),
        inputs_(std::move(inputs)),
        leaves_(std::move(leaves)),
        random_(std::move(random)) {}

  std::string name() const override { return "acc::CheckpointBackward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    at::AutoGradMode grad_mode(true);
    const RandomStates now(inputs_);
    random_.restore();
    auto inputs = detached_like(inputs_);
    at::Tensor output;
    try {
      Recomputing recomputing;
      output = function_(inputs);
    } catch (...) {
      now.restore();
      throw;
    }
    now.restore();
    // The recomputation ran guarded forwards (FULL_SHARD may have released their units again):
    // their nodes get the seam's backward pre-hooks like the outer graph's did.
    detail::attach_backward_pre_hooks(output);
    std::vector<at::Tensor> wrt;
    for (const auto& input : inputs) {
      if (input.defined() && input.requires_grad()) wrt.push_back(input);
    }
    for (const auto& leaf : leaves_) wrt.push_back(leaf);
    std::vector<at::Tensor> found;
    if (!wrt.empty() && output.requires_grad()) {
      found = torch::autograd::grad({output}, wrt, {grads.at(0)}, /*retain_graph=*/false,
                                    /*create_graph=*/false, /*allow_unused=*/true);
    }
    torch::autograd::variable_list out;
    size_t next = 0;
    for (const auto& input : inputs) {
      const bool differentiable = input.defined() && input.requires_grad();
      out.push_back(differentiable && next < found.size() ? found[next++] : at::Tensor());
    }
    for (size_t i = 0; i < leaves_.size(); ++i) out.push_back(next < found.size() ? found[next++] : at::Tensor());
    return out;
  }

 private:
  Function function_;
  std::vector<at::Tensor> inputs_;  // kept for the recomputation, as torch's checkpoint keeps them
  std::vector<at::Tensor> leaves_;
  RandomStates random_;
};

}  // namespace

namespace detail {
bool recomputing_checkpoint() { return recomputations > 0; }
}  // namespace detail

at::Tensor checkpoint(const Function& function, const std::vector<at::Tensor>& inputs) {
  if (!c10::GradMode::is_enabled()) return function(inputs);
  RandomStates random(inputs);
  auto detached = detached_like(inputs);
  at::Tensor probe = function(detached);
  if (!probe.requires_grad()) return probe;  // nothing to differentiate: keep the result as it is
  auto leaves = leaves_of(probe, detached);
  at::Tensor output;
  {
    // The values without any autograd relation to the probe (not even a view of it), so the node
    // below is the only history the result has.
    at::NoGradGuard no_grad;
    output = at::empty({0}, probe.options()).set_(probe.storage(), probe.storage_offset(), probe.sizes(),
                                                  probe.strides());
  }
  probe.reset();  // drops the graph and the activations it saved

  auto node = std::shared_ptr<CheckpointBackward>(
      new CheckpointBackward(function, inputs, leaves, std::move(random)), torch::autograd::deleteNode);
  std::vector<at::Tensor> edges_of = inputs;
  edges_of.insert(edges_of.end(), leaves.begin(), leaves.end());
  node->set_next_edges(torch::autograd::collect_next_edges(edges_of));
  torch::autograd::create_gradient_edge(output, node);
  return output;
}

at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& function, const at::Tensor& input) {
  return checkpoint([function](const std::vector<at::Tensor>& inputs) { return function(inputs.at(0)); },
                    std::vector<at::Tensor>{input});
}

}  // namespace acc
