// acc::Optimizer<Opt>::fused(true): the step of libtorch's Adam, AdamW and SGD through ATen's fused
// kernels (the ones Python's `fused=True` calls), one kernel per parameter group, device and dtype
// instead of libtorch's loop of several kernels per parameter. The state stays libtorch's
// (AdamParamState, AdamWParamState, SGDParamState), so checkpoints, FSDP's sharded optimizer state
// and a later unfused step read and write the same fields.
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>
#include <ATen/ops/zeros_like.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <acc/errors.h>
#include <acc/optimizer.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace acc::detail {
namespace {

using torch::optim::OptimizerParamGroup;

// Parameters of one device and dtype: one kernel launch.
struct Launch {
  c10::Device device;
  c10::ScalarType dtype;
  std::vector<at::Tensor> params;
};

// The parameters of a group that have a gradient, split by device and dtype (a handful of launches:
// a linear search is enough).
std::vector<Launch> by_device_and_dtype(const OptimizerParamGroup& group, const char* optimizer) {
  std::vector<Launch> out;
  for (const auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    if (p.grad().is_sparse() || p.is_complex() || !at::isFloatingType(p.scalar_type())) {
      throw ConfigError(std::string("acc: the fused ") + optimizer + " step takes dense real floating-point "
                        "parameters; a parameter of " + std::string(c10::toString(p.scalar_type())) +
                        (p.grad().is_sparse() ? " with a sparse gradient" : "") +
                        " has none. Call fused(false) for this optimizer.");
    }
    auto launch = std::find_if(out.begin(), out.end(), [&](const Launch& l) {
      return l.device == p.device() && l.dtype == p.scalar_type();
    });
    if (launch == out.end()) launch = out.insert(out.end(), Launch{p.device(), p.scalar_type(), {}});
    launch->params.push_back(p);
  }
  return out;
}

std::vector<at::Tensor> gradients(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  out.reserve(params.size());
  for (const auto& p : params) out.push_back(p.grad());
  return out;
}

// The steps after this update, as float32 scalars on the parameters' device (what the kernels
// read), made with one copy per launch rather than one per parameter.
std::vector<at::Tensor> step_tensors(const std::vector<int64_t>& steps, c10::Device device) {
  std::vector<float> values(steps.begin(), steps.end());
  auto all = at::tensor(values, at::TensorOptions().dtype(at::kFloat)).to(device);
  return all.unbind(0);
}

// Adam and AdamW share their state's fields and their kernels' signature.
template <typename Options, typename State, typename Kernel>
void adam_family_step(torch::optim::Optimizer& optimizer, const char* name, Kernel kernel) {
  for (auto& group : optimizer.param_groups()) {
    const auto& options = static_cast<const Options&>(group.options());
    const auto [beta1, beta2] = options.betas();
    for (const auto& [device, dtype, params] : by_device_and_dtype(group, name)) {
      std::vector<at::Tensor> exp_avgs, exp_avg_sqs, max_exp_avg_sqs;
      std::vector<int64_t> steps;
      std::vector<State*> states;
      for (const auto& p : params) {
        auto& slot = optimizer.state()[p.unsafeGetTensorImpl()];
        if (!slot) {  // as libtorch's first step does
          auto state = std::make_unique<State>();
          state->step(0);
          state->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
          state->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
          if (options.amsgrad()) state->max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
          slot = std::move(state);
        }
        auto& state = static_cast<State&>(*slot);
        if (options.amsgrad() && !state.max_exp_avg_sq().defined()) {
          state.max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        }
        exp_avgs.push_back(state.exp_avg());
        exp_avg_sqs.push_back(state.exp_avg_sq());
        if (options.amsgrad()) max_exp_avg_sqs.push_back(state.max_exp_avg_sq());
        steps.push_back(state.step() + 1);
        states.push_back(&state);
      }
      at::NoGradGuard no_grad;
      kernel(params, gradients(params), exp_avgs, exp_avg_sqs, max_exp_avg_sqs, step_tensors(steps, device),
             options.lr(), beta1, beta2, options.weight_decay(), options.eps(), options.amsgrad(),
             /*maximize=*/false, std::nullopt, std::nullopt);
      for (size_t i = 0; i < states.size(); ++i) states[i]->step(steps[i]);
    }
  }
}

void sgd_step(torch::optim::SGD& optimizer) {
  for (auto& group : optimizer.param_groups()) {
    const auto& options = static_cast<const torch::optim::SGDOptions&>(group.options());
    const bool momentum = options.momentum() != 0;
    for (const auto& [device, dtype, params] : by_device_and_dtype(group, "SGD")) {
      at::NoGradGuard no_grad;
      auto run = [&](const std::vector<at::Tensor>& ps, const std::vector<at::Tensor>& buffers, bool first) {
        if (ps.empty()) return;
        at::_fused_sgd_(ps, gradients(ps), buffers, options.weight_decay(), options.momentum(), options.lr(),
                        options.dampening(), options.nesterov(), /*maximize=*/false, first);
      };
      if (!momentum) {
        run(params, {}, false);
        continue;
      }
      // The kernel starts a momentum buffer (as the gradient) only for a whole launch: parameters
      // with a buffer and parameters on their first step go in separate launches.
      std::vector<at::Tensor> continuing, continuing_buffers, starting, starting_buffers;
      for (const auto& p : params) {
        auto& slot = optimizer.state()[p.unsafeGetTensorImpl()];
        if (slot && static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer().defined()) {
          continuing.push_back(p);
          continuing_buffers.push_back(static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer());
          continue;
        }
        auto state = std::make_unique<torch::optim::SGDParamState>();
        state->momentum_buffer(at::empty_like(p, at::MemoryFormat::Preserve));
        starting.push_back(p);
        starting_buffers.push_back(state->momentum_buffer());
        slot = std::move(state);
      }
      run(continuing, continuing_buffers, false);
      run(starting, starting_buffers, true);
    }
  }
}

}  // namespace

bool has_fused_step(const torch::optim::Optimizer& optimizer) {
  return dynamic_cast<const torch::optim::AdamW*>(&optimizer) != nullptr ||
         dynamic_cast<const torch::optim::Adam*>(&optimizer) != nullptr ||
         dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr;
}

void fused_step(torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr) {
    adam_family_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
        optimizer, "AdamW", [](auto&&... args) { at::_fused_adamw_(args...); });
  } else if (dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr) {
    adam_family_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(
        optimizer, "Adam", [](auto&&... args) { at::_fused_adam_(args...); });
  } else if (auto* sgd = dynamic_cast<torch::optim::SGD*>(&optimizer)) {
    sgd_step(*sgd);
  } else {
    throw_no_fused_kernel();
  }
}

void throw_no_fused_kernel() {
  throw ConfigError("acc: fused steps exist for torch::optim::Adam, AdamW and SGD (ATen's _fused_adam_, "
                    "_fused_adamw_ and _fused_sgd_); this optimizer has none. Leave fused off for it.");
}

}  // namespace acc::detail
