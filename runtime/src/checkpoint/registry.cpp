#include <acc/detail/checkpoint_registry.h>

#include <algorithm>

namespace acc::detail {

void CheckpointRegistry::add(std::vector<Entry>& list, const void* identity, SaveFunction save,
                             LoadFunction load) {
  for (const auto& entry : list) {
    if (entry.identity == identity) return;  // prepared twice
  }
  list.push_back(Entry{identity, std::move(save), std::move(load)});
}

void CheckpointRegistry::add_data_loader(const std::shared_ptr<ShardEpoch>& position) {
  loaders_.erase(std::remove_if(loaders_.begin(), loaders_.end(),
                                [](const auto& loader) { return loader.expired(); }),
                 loaders_.end());
  for (const auto& loader : loaders_) {
    if (loader.lock() == position) return;  // prepared twice
  }
  loaders_.push_back(position);
}

std::vector<std::shared_ptr<ShardEpoch>> CheckpointRegistry::data_loaders() const {
  std::vector<std::shared_ptr<ShardEpoch>> alive;
  for (const auto& loader : loaders_) {
    if (auto position = loader.lock()) alive.push_back(std::move(position));
  }
  return alive;
}

void CheckpointRegistry::add_model(torch::nn::Module& model) {
  if (std::find(models_.begin(), models_.end(), &model) == models_.end()) models_.push_back(&model);
}

void CheckpointRegistry::add_optimizer(torch::optim::Optimizer& optimizer) {
  if (std::find(optimizers_.begin(), optimizers_.end(), &optimizer) == optimizers_.end()) {
    optimizers_.push_back(&optimizer);
  }
}

}  // namespace acc::detail
