#pragma once
// Sharded checkpoint files (FSDP SHARDED_STATE_DICT): each shard is a safetensors file
// `{stem}.shard-{r}-of-{n}.safetensors` holding 1-D slices of tensors. Its metadata says, per
// tensor, which elements of the flattened whole the slice is ("acc.range.{name}": "begin end")
// and the whole's shape ("acc.shape.{name}"), so any number of processes can read back any
// element range, and the shards can be merged into one ordinary safetensors file. A whole
// tensor is the slice [0, numel).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <acc/safetensors.h>

namespace acc::detail {

/// A slice to write: elements [begin, end) of a tensor of `shape`, flattened.
struct TensorSlice {
  std::string name;
  at::Tensor values;  // end - begin elements (any shape; written flattened)
  int64_t begin = 0;
  int64_t end = 0;
  std::vector<int64_t> shape;
};

std::string shard_file_name(const std::string& stem, int shard, int shards);

/// Writes shard `shard` of `shards` to `path`.
void save_shard(const std::vector<TensorSlice>& slices, int shard, int shards, const std::string& path);

/// The slices of a set of files, by tensor name.
class ShardedTensors {
 public:
  /// Every `{stem}.shard-*-of-*.safetensors` in `directory`; CheckpointError when there is none or
  /// one of the n is missing.
  static ShardedTensors open_shards(const std::string& directory, const std::string& stem);
  /// An ordinary safetensors file: every tensor whole.
  static ShardedTensors open_whole(const std::string& path);

  /// The files read (for messages).
  const std::string& description() const { return description_; }
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const std::vector<int64_t>& shape(const std::string& name) const;
  at::ScalarType dtype(const std::string& name) const;
  /// Copies elements [begin, end) of `name` (flattened) into `destination` (end - begin elements,
  /// contiguous; converted to its dtype). CheckpointError when the files do not cover the range.
  void read(const std::string& name, int64_t begin, int64_t end, at::Tensor destination) const;

 private:
  struct Piece {
    size_t file;
    int64_t begin;
    int64_t end;
  };
  struct Entry {
    std::vector<int64_t> shape;
    std::vector<Piece> pieces;  // by begin
  };
  void add(safetensors::MappedFile file, bool sliced);

  std::string description_;
  std::vector<safetensors::MappedFile> files_;
  std::map<std::string, Entry> tensors_;
};

}  // namespace acc::detail
