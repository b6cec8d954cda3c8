#pragma once
// Weights a device map keeps on "disk": where their bytes are in a safetensors file, and tensors
// over a private mapping of exactly those bytes, made when a forward needs them and unmapped when
// the last reference goes. RssAnon never holds them; the page cache does, and can drop them.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <acc/safetensors.h>

#include "checkpoint/file_io.h"

namespace acc::detail {

struct DiskWeight {
  // Open from dispatch on: every forward maps from it without reopening, and a file replaced by
  // rename (save_model, a second dispatch into the same folder) cannot change what it reads.
  std::shared_ptr<const FileHandle> file;
  uint64_t offset = 0;  // absolute, in the file
  uint64_t bytes = 0;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
};

/// Where `name`'s bytes are in the open safetensors file `file` whose header is `header`
/// (FormatError when absent).
DiskWeight disk_weight(std::shared_ptr<const FileHandle> file, const safetensors::Header& header,
                       const std::string& name);

/// A CPU tensor over a copy-on-write mapping of the weight's bytes (a copy when the file leaves
/// them misaligned for their dtype). Writes to it never reach the file.
at::Tensor map_weight(const DiskWeight& weight);

/// Asks the kernel to read the pages under `tensor` (a CPU tensor over a mapping) ahead.
void read_ahead(const at::Tensor& tensor);

/// Writes `tensors` to a new safetensors file in `folder` (created if needed) whose name starts
/// with `stem` and is this process's own (fsynced, under a temporary name first), and returns where
/// each landed, in the order given.
std::vector<DiskWeight> write_disk_weights(const safetensors::NamedTensors& tensors,
                                           const std::string& folder, const std::string& stem);

}  // namespace acc::detail
