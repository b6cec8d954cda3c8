#include "ddp/ddp_strategy.h"

#include "ddp/reducer.h"
#include "parallel/local_strategy.h"
#include "parallel/meta_tensors.h"
#include "parallel/model_sync.h"

namespace acc::detail {

DdpStrategy::DdpStrategy(ProcessGroup& group, const DistributedDataParallelKwargs& options)
    : group_(&group), options_(options) {}

DdpStrategy::~DdpStrategy() = default;

GradientSync* DdpStrategy::prepare_model(torch::nn::Module& model, const ModelPreparation& preparation) {
  if (group_ == nullptr) return prepare_local_model(preparation);  // after release()
  check_empty_weights(group_, preparation.first_meta, /*from_rank0=*/true);
  check_models_agree(*group_, model);
  materialize_meta_tensors(model, preparation.device, /*trainable=*/true);
  broadcast_model_state(*group_, model);
  std::vector<NamedTensor> params;
  for (const auto& item : model.named_parameters()) {
    if (item.value().requires_grad()) params.push_back({item.key(), item.value()});
  }
  reducers_.push_back(std::make_unique<Reducer>(std::move(params), model.buffers(), *group_, options_));
  return reducers_.back().get();
}

void DdpStrategy::release() {
  reducers_.clear();
  group_ = nullptr;
}

std::unique_ptr<ParallelStrategy> make_ddp_strategy(const StrategyContext& context,
                                                    std::unique_ptr<ParallelStrategy> chosen) {
  if (context.group == nullptr) return chosen;
  return std::make_unique<DdpStrategy>(*context.group, context.ddp);
}

}  // namespace acc::detail
