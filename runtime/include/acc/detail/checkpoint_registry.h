#pragma once
// What save_state covers: the models, optimizers and schedulers an Accelerator prepared, the data
// loaders it prepared and the objects the user registered. In a public header only because the
// Accelerator's templates (prepare, register_for_checkpointing) add to it; not an API.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>

#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <acc/checkpointing.h>
#include <acc/data_sharding.h>

namespace acc::detail {

// libtorch keeps LRScheduler's step counter protected and offers no save/load; naming the member
// through a derived class is the standard-conforming way to reach it from outside.
struct LRSchedulerAccess : torch::optim::LRScheduler {
  static unsigned& step_count(torch::optim::LRScheduler& scheduler) {
    return scheduler.*(&LRSchedulerAccess::step_count_);
  }
};

template <typename T, typename = void>
struct has_archive_methods : std::false_type {};
template <typename T>
struct has_archive_methods<
    T, std::void_t<decltype(std::declval<T&>().save(std::declval<torch::serialize::OutputArchive&>())),
                   decltype(std::declval<T&>().load(std::declval<torch::serialize::InputArchive&>()))>>
    : std::true_type {};
/// Everything save_state writes, in registration order. Each kind becomes numbered files:
/// model.safetensors, model_1.safetensors, ...; optimizer.safetensors with optimizer.libtorch.bin,
/// optimizer_1.*; scheduler.bin;
/// sampler.bin, sampler_1.bin (one per data loader, a row per rank); custom_checkpoint_{i}.bin.
class CheckpointRegistry {
 public:
  struct Entry {
    const void* identity = nullptr;
    SaveFunction save;
    LoadFunction load;
  };

  void add_model(torch::nn::Module& model);
  void add_optimizer(torch::optim::Optimizer& optimizer);

  /// Any libtorch LRScheduler (its step count; the learning rates live in the optimizer's state).
  /// Other schedulers keep private state libtorch does not expose: register a save/load pair
  /// for them with register_for_checkpointing.
  template <typename S>
  void add_scheduler(S& scheduler) {
    if constexpr (std::is_base_of_v<torch::optim::LRScheduler, S>) {
      torch::optim::LRScheduler& base = scheduler;
      add(schedulers_, &scheduler,
          [&base](torch::serialize::OutputArchive& archive) {
            archive.write("step_count",
                          c10::IValue(static_cast<int64_t>(detail::LRSchedulerAccess::step_count(base))));
          },
          [&base](torch::serialize::InputArchive& archive) {
            c10::IValue value;
            archive.read("step_count", value);
            detail::LRSchedulerAccess::step_count(base) = static_cast<unsigned>(value.toInt());
          });
    }
  }

  /// A prepared data loader's position (seed, epoch, batches consumed), saved as sampler.bin,
  /// sampler_1.bin, ... in preparation order. Held weakly: a destroyed loader drops out, and
  /// the loaders alive at save time are numbered in the order they were prepared.
  void add_data_loader(const std::shared_ptr<ShardEpoch>& position);
  /// The prepared loaders still alive, in preparation order.
  std::vector<std::shared_ptr<ShardEpoch>> data_loaders() const;

  /// register_for_checkpointing: an object with save(OutputArchive&) and load(InputArchive&), or a
  /// pair of functions.
  void add_custom(const void* identity, SaveFunction save, LoadFunction load) {
    custom_.push_back(Entry{identity, std::move(save), std::move(load)});
  }

  const std::vector<torch::nn::Module*>& models() const { return models_; }
  const std::vector<torch::optim::Optimizer*>& optimizers() const { return optimizers_; }
  const std::vector<Entry>& schedulers() const { return schedulers_; }
  const std::vector<Entry>& custom() const { return custom_; }

 private:
  static void add(std::vector<Entry>& list, const void* identity, SaveFunction save, LoadFunction load);
  std::vector<torch::nn::Module*> models_;
  std::vector<torch::optim::Optimizer*> optimizers_;
  std::vector<Entry> schedulers_;
  std::vector<std::weak_ptr<ShardEpoch>> loaders_;
  std::vector<Entry> custom_;
};


}  // namespace acc::detail
