#pragma once
// save_state / load_state behind the Accelerator: the files of a training checkpoint, who writes
// them, and the automatic naming and rotation of ProjectConfiguration (docs/checkpointing.md).
#include <ATen/core/Generator.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <acc/detail/checkpoint_registry.h>
#include <acc/project_configuration.h>

namespace acc {
class PartialState;
}

namespace acc::detail {

class StateDictLayout;

/// Where and how save_state / load_state run (the Accelerator fills it in).
struct CheckpointContext {
  CheckpointRegistry* registry = nullptr;
  ProjectConfiguration* project = nullptr;
  const PartialState* state = nullptr;
  /// How models and optimizers are laid out (state_dict_layout.h): plain, or the strategy's.
  StateDictLayout* layout = nullptr;
  /// Device for the tensors of libtorch archives (LBFGS's scalars); optimizer state tensors go to
  /// their parameter's device.
  c10::Device device = c10::Device(c10::kCPU);
  /// Extra per-rank values stored with the RNG states (Accelerate's `step`).
  std::vector<std::pair<std::string, int64_t>> counters;
};

/// Writes a checkpoint crash-safely (directory.h) and returns its directory. With an empty
/// `directory`, automatic naming must be on: {project_dir}/checkpoints/checkpoint_{iteration},
/// then iteration += 1 and checkpoints beyond total_limit (oldest first) are removed. Shared files
/// come from the main process (each node's local main with save_on_each_node), per-rank files
/// from every rank; every rank must call it.
std::string save_training_state(CheckpointContext& context, const std::string& directory);

/// Restores what save_training_state wrote. An empty `directory` takes the newest complete
/// checkpoint under {project_dir}/checkpoints. Returns the directory and fills the values of
/// `context.counters` found in the checkpoint.
std::string load_training_state(CheckpointContext& context, const std::string& directory);

/// The generators a checkpoint saves: the CPU's, then every CUDA device's.
std::vector<at::Generator> rng_generators();

/// CheckpointError naming `path` when the checkpoint lacks it: it was saved with other prepared
/// or registered objects (or another number of processes) than this program has.
void require_checkpoint_file(const std::string& path);

}  // namespace acc::detail
