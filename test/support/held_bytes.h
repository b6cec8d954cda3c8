#pragma once
// Gradient and Adam-state bytes a rank holds for a prepared model and its optimizer, counted from
// the tensors themselves: the model parameters' .grad, the .grad of optimizer parameters that are
// not model parameters (the shard pieces under FSDP), and every Adam state tensor. The FSDP
// memory test and benchmark compare these counts between DDP and sharding.
#include <torch/nn/module.h>
#include <torch/optim/adam.h>

#include <cstdint>

namespace acc::testing {

inline int64_t tensor_bytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * t.element_size() : 0;
}

inline int64_t gradient_and_adam_state_bytes(torch::nn::Module& model,
                                             torch::optim::Optimizer& optimizer) {
  int64_t total = 0;
  const auto model_parameters = model.parameters();
  for (const auto& p : model_parameters) total += tensor_bytes(p.grad());
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) {
      bool is_model_parameter = false;
      for (const auto& m : model_parameters) is_model_parameter = is_model_parameter || m.is_same(p);
      if (!is_model_parameter) total += tensor_bytes(p.grad());
    }
  }
  for (const auto& [key, state] : optimizer.state()) {
    const auto& adam = static_cast<const torch::optim::AdamParamState&>(*state);
    total += tensor_bytes(adam.exp_avg()) + tensor_bytes(adam.exp_avg_sq()) +
             tensor_bytes(adam.max_exp_avg_sq());
  }
  return total;
}

}  // namespace acc::testing
