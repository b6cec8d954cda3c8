#pragma once
// Training state for save_state / load_state: what the Accelerator prepared (models, optimizers,
// schedulers, data loaders), what the user registered. File names follow Accelerate's (docs/checkpointing.md).
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <acc/checkpoint_model.h>
#include <acc/data_sharding.h>
#include <acc/project_configuration.h>

namespace acc {

class PartialState;

using SaveFunction = std::function<void(torch::serialize::OutputArchive&)>;
using LoadFunction = std::function<void(torch::serialize::InputArchive&)>;

namespace detail {
class FsdpStateDicts;
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
}  // namespace detail

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
  void add_data_loader(const std::shared_ptr<detail::ShardEpoch>& position);
  /// The prepared loaders still alive, in preparation order.
  std::vector<std::shared_ptr<detail::ShardEpoch>> data_loaders() const;

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
  std::vector<std::weak_ptr<detail::ShardEpoch>> loaders_;
  std::vector<Entry> custom_;
};

/// Where and how save_state / load_state run (the Accelerator fills it in).
struct CheckpointContext {
  CheckpointRegistry* registry = nullptr;
  ProjectConfiguration* project = nullptr;
  const PartialState* state = nullptr;
  /// Device for the tensors of libtorch archives (LBFGS's scalars); optimizer state tensors go to
  /// their parameter's device.
  c10::Device device = c10::Device(c10::kCPU);
  /// Extra per-rank values stored with the RNG states (Accelerate's `step`).
  std::vector<std::pair<std::string, int64_t>> counters;
  /// Under FSDP: how models and optimizers are laid out (fsdp_state_dict.h); null otherwise.
  detail::FsdpStateDicts* fsdp = nullptr;
};

/// Writes a checkpoint crash-safely (checkpoint_directory.h) and returns its directory. With an
/// empty `directory`, automatic naming must be on: {project_dir}/checkpoints/checkpoint_{iteration},
/// then iteration += 1 and checkpoints beyond total_limit (oldest first) are removed. Shared files
/// come from the main process (each node's local main with save_on_each_node), per-rank files
/// from every rank; every rank must call it.
std::string save_training_state(CheckpointContext& context, const std::string& directory);

/// Restores what save_training_state wrote. An empty `directory` takes the newest complete
/// checkpoint under {project_dir}/checkpoints. Returns the directory and fills the values of
/// `context.counters` found in the checkpoint.
std::string load_training_state(CheckpointContext& context, const std::string& directory);

/// The newest complete checkpoints/checkpoint_{n} under `project_dir` ("" when there is none).
std::string latest_checkpoint(const std::string& project_dir);

/// Merges the model shards of an FSDP SHARDED_STATE_DICT checkpoint (`model.shard-*-of-N`,
/// `model_1.shard-*`, ...) into whole safetensors files in `output_dir` (model.safetensors, ...),
/// which load into an unsharded model or into Python. Returns the files written. What the
/// `acc-merge-weights` command runs (Accelerate's `accelerate merge-weights`).
std::vector<std::string> merge_sharded_weights(const std::string& checkpoint_dir, const std::string& output_dir);

}  // namespace acc
