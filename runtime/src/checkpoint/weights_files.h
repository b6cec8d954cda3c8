#pragma once
// Where a model checkpoint's tensors are: a weights file, an index and its shards, or a directory
// holding either (model.safetensors(.index.json), pytorch_model.bin(.index.json)). Shared by
// load_checkpoint_in_model and big-model loading.
#include <set>
#include <string>
#include <vector>

namespace acc::detail {

struct WeightsFile {
  std::string path;
  std::set<std::string> names;  // those the index gives this file; empty: every tensor in it
  bool pickle = false;          // a .bin/.pt/.pth libtorch pickle rather than safetensors
};

/// The files of the checkpoint at `path`, in index order of file name. CheckpointError when the
/// path does not exist or a directory holds none of the four names.
std::vector<WeightsFile> weights_files(const std::string& path);

}  // namespace acc::detail
