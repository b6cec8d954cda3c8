#pragma once
// Accelerate's ProjectConfiguration: where save_state writes and how checkpoints are named.
#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>

namespace acc {

/// The layout save_state writes (load_state reads both, telling them apart by their files).
enum class CheckpointFormat {
  /// acc's own: crash-safe, checksummed, fast to load; libtorch archives for the small files.
  Acc,
  /// Python Accelerate's: model.safetensors, optimizer.bin (PyTorch's optimizer state_dict as a
  /// torch.save pickle), scheduler.bin, random_states_{rank}.pkl, so that
  /// `accelerator.load_state(dir)` in Python continues the run. Whole tensors only (not FSDP).
  Accelerate,
};

struct ProjectConfiguration {
  /// Root of the project: automatic checkpoints go to {project_dir}/checkpoints/checkpoint_{n}.
  TORCH_ARG(std::string, project_dir) = "";
  /// Defaults to project_dir.
  TORCH_ARG(std::string, logging_dir) = "";
  /// save_state() without a directory writes checkpoints/checkpoint_{iteration}.
  TORCH_ARG(bool, automatic_checkpoint_naming) = false;
  /// Keep at most this many automatic checkpoints (the oldest are removed after a save completes).
  TORCH_ARG(std::optional<int64_t>, total_limit);
  /// Number of the next automatic checkpoint; save_state increments it, load_state sets it to
  /// the loaded checkpoint's number + 1.
  TORCH_ARG(int64_t, iteration) = 0;
  /// Every node's local main process writes the shared files (nodes without a shared filesystem).
  TORCH_ARG(bool, save_on_each_node) = false;
  /// load_state checks every file against the CRC-32C save_state recorded (checksums_<rank>.txt) and
  /// names a damaged one. Costs a pass over the bytes at several GB/s; false loads without it.
  TORCH_ARG(bool, verify_checksums) = true;
  /// What save_state writes: acc's layout, or Accelerate's for a run that continues in Python
  /// (docs/checkpointing.md, "Continuing in Python, or from Python").
  TORCH_ARG(CheckpointFormat, checkpoint_format) = CheckpointFormat::Acc;
};

}  // namespace acc
