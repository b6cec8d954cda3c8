#pragma once
// DDP: every rank holds the whole model; rank 0's weights are broadcast at prepare and a Reducer
// per model all-reduces gradients during backward (ddp/reducer.h).
#include <memory>
#include <vector>

#include "parallel/parallel_strategy.h"

namespace acc::detail {

class Reducer;

class DdpStrategy final : public ParallelStrategy {
 public:
  DdpStrategy(ProcessGroup& group, const DistributedDataParallelKwargs& options);
  ~DdpStrategy() override;

  GradientSync* prepare_model(torch::nn::Module& model, const ModelPreparation& preparation) override;
  void release() override;

 private:
  ProcessGroup* group_;
  DistributedDataParallelKwargs options_;
  std::vector<std::unique_ptr<Reducer>> reducers_;  // one per prepared model
};

/// Replaces `chosen` on several processes.
std::unique_ptr<ParallelStrategy> make_ddp_strategy(const StrategyContext& context,
                                                    std::unique_ptr<ParallelStrategy> chosen);

}  // namespace acc::detail
