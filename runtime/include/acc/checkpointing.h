#pragma once
// Training checkpoints (save_state / load_state, docs/checkpointing.md): what a user registers
// and what a finished checkpoint directory looks like from outside. File names follow
// Accelerate's.
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <functional>
#include <string>
#include <vector>

namespace acc {

/// What register_for_checkpointing takes for an object without save/load members.
using SaveFunction = std::function<void(torch::serialize::OutputArchive&)>;
using LoadFunction = std::function<void(torch::serialize::InputArchive&)>;

/// Present in every committed checkpoint directory; readers skip directories without it.
inline constexpr const char* kCheckpointCompleteMarker = "acc_checkpoint_complete";

/// True when `directory` holds the completion marker.
bool is_complete_checkpoint(const std::string& directory);

/// The newest complete checkpoints/checkpoint_{n} under `project_dir` ("" when there is none).
std::string latest_checkpoint(const std::string& project_dir);

/// Merges the model shards of an FSDP SHARDED_STATE_DICT checkpoint (`model.shard-*-of-N`,
/// `model_1.shard-*`, ...) into whole safetensors files in `output_dir` (model.safetensors, ...),
/// which load into an unsharded model or into Python. Returns the files written. What the
/// `acc-merge-weights` command runs (Accelerate's `accelerate merge-weights`).
std::vector<std::string> merge_sharded_weights(const std::string& checkpoint_dir, const std::string& output_dir);

}  // namespace acc
