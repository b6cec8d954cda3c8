#pragma once
// save_state / load_state of prepared models and optimizers under FSDP (docs/fsdp.md,
// "Checkpoints"). FULL_STATE_DICT writes exactly the files DDP writes (whole tensors), gathering
// each unit's optimizer state from the shards one field at a time. SHARDED_STATE_DICT has every
// rank write its own slices (checkpoint_shards.h) and lets every rank read back the element
// ranges it now owns, so a checkpoint loads on another number of processes.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <string>

#include <acc/fsdp.h>

namespace acc::detail {

class ShardedEngine;

class FsdpStateDicts {
 public:
  /// `engine` null: nothing is sharded (one process, NO_SHARD), and SHARDED_STATE_DICT writes
  /// one shard from the main process.
  FsdpStateDicts(StateDictType type, ShardedEngine* engine);

  /// The path to write checkpoint file `name` to (the caller records it for fsync).
  using FileFor = std::function<std::string(const std::string& name)>;
  /// Collective: every rank calls them, `writer` true where the checkpoint's shared files are
  /// written (the main process). `stem`: "model", "model_1", "optimizer", ...
  void save_model(torch::nn::Module& model, const std::string& stem, bool writer, const FileFor& file);
  void save_optimizer(torch::optim::Optimizer& optimizer, const std::string& stem, bool writer,
                      const FileFor& file);
  void load_model(torch::nn::Module& model, const std::string& directory, const std::string& stem);
  /// `device`: where libtorch's archive puts its tensors; state tensors go where the parameters are.
  void load_optimizer(torch::optim::Optimizer& optimizer, const std::string& directory,
                      const std::string& stem, c10::Device device);

 private:
  bool sharded_files() const { return type_ == StateDictType::SHARDED_STATE_DICT; }

  StateDictType type_;
  ShardedEngine* engine_;
  int shard_ = 0;
  int shards_ = 1;
  bool writes_shards_ = true;  // false on the other machines' replicas (HYBRID_SHARD_ZERO2)
};

}  // namespace acc::detail
