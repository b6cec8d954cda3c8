#pragma once
// Checksums of checkpoint files. save_state records the CRC-32C and size of every file each process
// wrote in checksums_<rank>.txt beside them; load_state, while a ChecksumVerification of the
// directory is alive, checks every file it reads against them (a flipped bit on disk or in a copy is
// named, not loaded). Checkpoints without manifests (older acc, Accelerate) load unverified.
#include <cstddef>
#include <string>
#include <vector>

namespace acc::detail {

/// The manifest process `rank` writes: "checksums_<rank>.txt".
std::string checksum_manifest_name(int rank);

/// Writes the manifest `manifest` for `paths` (files inside `directory`, listed relative to it):
/// one line "<crc32c of each 16 MiB, 8 hex digits, comma-separated> <size> <relative path>" each
/// (chunks: verified in parallel, as fast as memory allows).
void write_checksum_manifest(const std::string& directory, const std::vector<std::string>& paths,
                             const std::string& manifest);

/// RAII: while alive, verify_checkpoint_file checks files under `directory` against its manifests
/// (read here; CheckpointError naming a malformed one). Does nothing when `enabled` is false.
class ChecksumVerification {
 public:
  ChecksumVerification(const std::string& directory, bool enabled);
  ~ChecksumVerification();
  ChecksumVerification(const ChecksumVerification&) = delete;
  ChecksumVerification& operator=(const ChecksumVerification&) = delete;
};

/// Checks `size` bytes at `data`, the whole of `path`, when a ChecksumVerification of a directory
/// above it is alive and a manifest lists it: CheckpointError naming the file, what was recorded and
/// what was found.
void verify_checkpoint_file(const std::string& path, const void* data, size_t size);

/// The whole of a checkpoint file (a regular file; open_file's checks), verified.
std::string read_checkpoint_file(const std::string& path);

}  // namespace acc::detail
