#pragma once
// The state-dict seam: how a prepared model's and optimizer's state is laid out in a checkpoint.
// save_state / load_state (training_state.cpp) and Accelerator::save_model call it without knowing
// the parallelism strategy. Single-process and DDP runs use the plain layout below; FSDP brings its
// own (fsdp/sharded_state_dict.h); the Accelerator picks one.
//
// A strategy's layout sees checkpointing only through this header and the file formats it writes
// with (shard_files.h, optimizer_files.h, and the public <acc/checkpoint_model.h>); the rest of
// checkpoint/ (training state, directories, loader positions) is internal, and checkpoint/ never
// includes a strategy's code. test/layering checks both.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>

namespace acc::detail {

class StateDictLayout {
 public:
  virtual ~StateDictLayout() = default;

  /// True for the plain layout (whole tensors on every process): the only one whose state
  /// Accelerate's save_state layout (CheckpointFormat::Accelerate) can hold.
  virtual bool whole_tensors() const { return false; }

  /// The path to write checkpoint file `name` to (the caller records it for fsync).
  using FileFor = std::function<std::string(const std::string& name)>;

  /// Collective: every rank calls each of these in the same order; `writer` is true where the
  /// checkpoint's shared files are written. `stem`: "model", "model_1", "optimizer", ...
  virtual void save_model(torch::nn::Module& model, const std::string& stem, bool writer, const FileFor& file) = 0;
  virtual void save_optimizer(torch::optim::Optimizer& optimizer, const std::string& stem, bool writer,
                              const FileFor& file) = 0;
  /// CheckpointError when `directory` lacks the files or they do not fit.
  virtual void load_model(torch::nn::Module& model, const std::string& directory, const std::string& stem) = 0;
  /// `device`: where libtorch's archive puts its few tensors; state tensors go where the
  /// parameters are.
  virtual void load_optimizer(torch::optim::Optimizer& optimizer, const std::string& directory,
                              const std::string& stem, c10::Device device) = 0;

  /// Accelerator::save_model: whole weights in Accelerate's layout (acc::save_model), written by
  /// the `writer`. Collective.
  virtual void save_weights(const torch::nn::Module& model, const std::string& directory,
                            const std::string& max_shard_size, bool safe_serialization, bool writer) = 0;
};

/// Whole tensors as each process holds them: model.safetensors, optimizer.safetensors +
/// optimizer.libtorch.bin, written by the writer alone.
std::unique_ptr<StateDictLayout> make_plain_state_dict_layout();

}  // namespace acc::detail
