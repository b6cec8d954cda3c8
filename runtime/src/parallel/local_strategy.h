#pragma once
// One process: the model is the model, nothing synchronises its gradients.
#include <memory>

#include "parallel/parallel_strategy.h"

namespace acc::detail {

class LocalStrategy final : public ParallelStrategy {
 public:
  GradientSync* prepare_model(torch::nn::Module& model, const ModelPreparation& preparation) override;
};

/// LocalStrategy::prepare_model, also for strategies after release().
GradientSync* prepare_local_model(const ModelPreparation& preparation);

/// The first of core's list: always applies (a later strategy replaces or wraps it).
std::unique_ptr<ParallelStrategy> make_local_strategy(const StrategyContext& context,
                                                      std::unique_ptr<ParallelStrategy> chosen);

}  // namespace acc::detail
