#pragma once
// Reading libtorch archives (scheduler.bin, custom_checkpoint_N.bin, sampler.bin, random_states_N.bin,
// optimizer.libtorch.bin) out of a checkpoint: libtorch names neither the file nor the problem in its
// errors ("PytorchStreamReader failed reading zip archive"), so every read goes through here and a
// damaged or foreign file is a CheckpointError naming it.
#include <torch/serialize/input-archive.h>

#include <string>

#include <c10/util/Exception.h>

namespace acc::detail {

/// The archive in `path`, its bytes verified against the checkpoint's checksums (checksums.h).
torch::serialize::InputArchive read_archive(const std::string& path, c10::Device device);

/// The CheckpointError for a libtorch error raised while reading values out of `path`.
[[noreturn]] void throw_archive_error(const std::string& path, const c10::Error& error);

/// Runs `read`, which reads values out of the archive of `path`, naming the file in its errors.
template <typename Read>
void read_values(const std::string& path, Read&& read) {
  try {
    read();
  } catch (const c10::Error& error) {
    throw_archive_error(path, error);
  }
}

}  // namespace acc::detail
