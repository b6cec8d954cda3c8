#include "parallel/local_strategy.h"

#include "parallel/model_sync.h"

namespace acc::detail {

GradientSync* LocalStrategy::prepare_model(torch::nn::Module& /*model*/, const ModelPreparation& preparation) {
  return prepare_local_model(preparation);
}

GradientSync* prepare_local_model(const ModelPreparation& preparation) {
  // No other process can fill a model built empty: say so now rather than at the first forward.
  check_empty_weights(nullptr, preparation.first_meta, /*from_rank0=*/true);
  return nullptr;
}

std::unique_ptr<ParallelStrategy> make_local_strategy(const StrategyContext& /*context*/,
                                                      std::unique_ptr<ParallelStrategy> /*chosen*/) {
  return std::make_unique<LocalStrategy>();
}

}  // namespace acc::detail
