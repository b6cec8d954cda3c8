#pragma once
// Optimizer state in checkpoints: the state tensors (Adam's moments, momentum buffers, ...) in a
// safetensors file read back by memory map, everything else (param groups and their options,
// step counts, LBFGS's scalars) in what libtorch's Optimizer::save writes without them.
#include <torch/optim/optimizer.h>

#include <string>

namespace acc::detail {

/// Writes `optimizer`'s state tensors to `tensors_path` (safetensors, names
/// "state.{parameter}.{field}" with parameters numbered across param groups in order) and the
/// rest to `archive_path` (a libtorch archive). Optimizer types acc does not know keep all their
/// state in the archive.
void save_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& tensors_path,
                          const std::string& archive_path);

/// Restores what save_optimizer_state wrote; state tensors are copied onto their parameter's
/// device, the archive's few tensors (LBFGS's scalars) onto `device`. CheckpointError when the
/// files do not match the optimizer.
void load_optimizer_state(torch::optim::Optimizer& optimizer, const std::string& tensors_path,
                          const std::string& archive_path, c10::Device device);

/// The archive half alone: libtorch's Optimizer::load of `archive_path` (its bytes verified against
/// the checkpoint's checksums), with a CheckpointError naming the file when it is damaged or was
/// saved from another optimizer. FSDP reads it into the whole-parameter view of its optimizer.
void load_optimizer_archive(torch::optim::Optimizer& optimizer, const std::string& archive_path, c10::Device device);

}  // namespace acc::detail
