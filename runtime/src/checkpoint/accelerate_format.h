#pragma once
// save_state / load_state in the layout of Python Accelerate's save_state, so that a run moves
// between Python and C++ (docs/checkpointing.md, "Continuing in Python, or from Python"):
// model.safetensors (model_1, ...; or pytorch_model.bin from Python), optimizer.bin (PyTorch's
// optimizer state_dict, a torch.save pickle), scheduler.bin, random_states_{rank}.pkl. What has
// no C++ counterpart (Python objects, samplers, GradScaler) is named in one warning on load.
#include <string>

#include "checkpoint/state_dict_layout.h"
#include "checkpoint/training_state.h"

namespace acc::detail {

/// True when `directory` was written in Accelerate's layout (by Python Accelerate or by acc with
/// CheckpointFormat::Accelerate): it holds random_states_0.pkl.
bool is_accelerate_checkpoint(const std::string& directory);

/// Writes every file of the Accelerate layout through `file` (the checkpoint's temporary
/// directory). Collective (loader positions); `writer`: this process writes the shared files.
void save_accelerate_state(const CheckpointContext& context, bool writer, const StateDictLayout::FileFor& file);

/// Restores an Accelerate-layout checkpoint into the registered objects.
void load_accelerate_state(CheckpointContext& context, const std::string& directory);

}  // namespace acc::detail
