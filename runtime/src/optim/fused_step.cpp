// acc::Optimizer<Opt>::fused(true): the step of libtorch's Adam, AdamW and SGD through ATen's fused
// kernels (the ones Python's `fused=True` calls), one kernel per parameter group, device and dtype
// instead of libtorch's loop of several kernels per parameter. The state stays libtorch's
// (AdamParamState, AdamWParamState, SGDParamState), so checkpoints, FSDP's sharded optimizer state
// and a later unfused step read and write the same fields; Adam's step counts also live on the
// device (optim/device_step.h). Nothing here reads the device: the host queues the step and goes on.
#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/_fused_adamw.h>
#include <ATen/ops/_fused_sgd.h>
#include <ATen/ops/_foreach_add.h>
#include <ATen/ops/_foreach_sub.h>
#include <ATen/ops/zeros_like.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <acc/errors.h>
#include <acc/optimizer.h>

#include "optim/device_step.h"

#include <algorithm>
#include <optional>
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

std::optional<at::Tensor> on_device(const std::optional<at::Tensor>& tensor, c10::Device device) {
  if (!tensor) return std::nullopt;
  return tensor->to(device);  // the same tensor when it is there already: no copy
}

// Adam and AdamW share their state's fields and their kernels' signature.
template <typename Options, typename State, typename Kernel>
void adam_family_step(torch::optim::Optimizer& optimizer, const char* name, const FusedStepScaling& scaling,
                      Kernel kernel) {
  for (auto& group : optimizer.param_groups()) {
    const auto& options = static_cast<const Options&>(group.options());
    const auto [beta1, beta2] = options.betas();
    for (const auto& [device, dtype, params] : by_device_and_dtype(group, name)) {
      std::vector<at::Tensor> exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps;
      for (const auto& p : params) {
        auto& slot = optimizer.state()[p.unsafeGetTensorImpl()];
        auto* state = dynamic_cast<DeviceStepped<State>*>(slot.get());
        if (state == nullptr) {
          State plain;
          if (slot) {
            plain = static_cast<State&>(*slot);
          } else {  // as libtorch's first step does
            plain.step(0);
            plain.exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
            plain.exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
          }
          auto counted = std::make_unique<DeviceStepped<State>>(std::move(plain));
          state = counted.get();
          slot = std::move(counted);
        }
        if (options.amsgrad() && !state->max_exp_avg_sq().defined()) {
          state->max_exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        }
        exp_avgs.push_back(state->exp_avg());
        exp_avg_sqs.push_back(state->exp_avg_sq());
        if (options.amsgrad()) max_exp_avg_sqs.push_back(state->max_exp_avg_sq());
        steps.push_back(state->device_step(device));
        state->count_step(scaling.found_inf.has_value());
      }
      at::NoGradGuard no_grad;
      // As torch's _fused_adam(w): the counts move on the device, and back where the kernel skipped.
      at::_foreach_add_(steps, 1);
      const auto found_inf = on_device(scaling.found_inf, device);
      kernel(params, gradients(params), exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, options.lr(), beta1, beta2,
             options.weight_decay(), options.eps(), options.amsgrad(), /*maximize=*/false,
             on_device(scaling.grad_scale, device), found_inf);
      if (found_inf) at::_foreach_sub_(steps, std::vector<at::Tensor>(steps.size(), found_inf->reshape({})));
    }
  }
}

void sgd_step(torch::optim::SGD& optimizer, const FusedStepScaling& scaling) {
  for (auto& group : optimizer.param_groups()) {
    const auto& options = static_cast<const torch::optim::SGDOptions&>(group.options());
    const bool momentum = options.momentum() != 0;
    for (const auto& [device, dtype, params] : by_device_and_dtype(group, "SGD")) {
      at::NoGradGuard no_grad;
      auto run = [&](const std::vector<at::Tensor>& ps, const std::vector<at::Tensor>& buffers, bool first) {
        if (ps.empty()) return;
        at::_fused_sgd_(ps, gradients(ps), buffers, options.weight_decay(), options.momentum(), options.lr(),
                        options.dampening(), options.nesterov(), /*maximize=*/false, first,
                        on_device(scaling.grad_scale, device), on_device(scaling.found_inf, device));
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

void fused_step(torch::optim::Optimizer& optimizer, const FusedStepScaling& scaling) {
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr) {
    adam_family_step<torch::optim::AdamWOptions, torch::optim::AdamWParamState>(
        optimizer, "AdamW", scaling, [](auto&&... args) { at::_fused_adamw_(args...); });
  } else if (dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr) {
    adam_family_step<torch::optim::AdamOptions, torch::optim::AdamParamState>(
        optimizer, "Adam", scaling, [](auto&&... args) { at::_fused_adam_(args...); });
  } else if (auto* sgd = dynamic_cast<torch::optim::SGD*>(&optimizer)) {
    sgd_step(*sgd, scaling);
  } else {
    throw_no_fused_kernel();
  }
}

void write_back_step_counts(torch::optim::Optimizer& optimizer) {
  for (auto& [key, state] : optimizer.state()) {
    if (state) write_back_step_count(*state);
  }
}

void throw_no_fused_kernel() {
  throw ConfigError("acc: fused steps exist for torch::optim::Adam, AdamW and SGD (ATen's _fused_adam_, "
                    "_fused_adamw_ and _fused_sgd_); this optimizer has none. Leave fused off for it.");
}

}  // namespace acc::detail
