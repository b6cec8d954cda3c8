#include "parallel/parallel_strategy.h"

#include <torch/nn/utils/clip_grad.h>

#include "checkpoint/state_dict_layout.h"

namespace acc::detail {

ParallelStrategy::~ParallelStrategy() = default;

std::shared_ptr<OptimizerController> ParallelStrategy::prepare_optimizer(
    torch::optim::Optimizer& /*optimizer*/, std::shared_ptr<OptimizerController> controller) {
  return controller;
}

double ParallelStrategy::clip_grad_norm_(const std::vector<at::Tensor>& parameters, double max_norm,
                                         double norm_type) {
  return torch::nn::utils::clip_grad_norm_(parameters, max_norm, norm_type);
}

void ParallelStrategy::clip_grad_value_(const std::vector<at::Tensor>& parameters, double clip_value) {
  torch::nn::utils::clip_grad_value_(parameters, clip_value);
}

FullParametersGuard ParallelStrategy::full_parameters(const torch::nn::Module& /*model*/, bool /*writeback*/) {
  return {};
}

std::unique_ptr<StateDictLayout> ParallelStrategy::make_state_dict_layout() {
  return make_plain_state_dict_layout();
}

}  // namespace acc::detail
