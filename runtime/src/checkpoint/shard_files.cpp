#include "checkpoint/shard_files.h"

#include <sys/stat.h>

#include <ATen/ops/empty.h>

#include <algorithm>
#include <optional>
#include <filesystem>
#include <regex>
#include <sstream>

#include <acc/checkpoint_model.h>
#include <acc/checkpointing.h>

#include "checkpoint/file_io.h"
#include "checkpoint/tensor_copy.h"

namespace fs = std::filesystem;

namespace acc::detail {
namespace {

const std::string kRange = "acc.range.";
const std::string kShape = "acc.shape.";

std::string join(const std::vector<int64_t>& values, char separator) {
  std::ostringstream out;
  for (size_t i = 0; i < values.size(); ++i) out << (i ? std::string(1, separator) : "") << values[i];
  return out.str();
}

// The integers of acc's shard metadata; std::nullopt for anything else (std::stoll would throw
// std::invalid_argument or std::out_of_range at the first word that is not one).
std::optional<std::vector<int64_t>> split(const std::string& text, char separator) {
  std::vector<int64_t> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, separator)) {
    if (item.empty() || item.size() > 18 || item.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    out.push_back(std::stoll(item));
  }
  return out;
}

const std::string* find(const safetensors::Metadata& metadata, const std::string& key) {
  for (const auto& [k, v] : metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

}  // namespace

std::string shard_file_name(const std::string& stem, int shard, int shards) {
  return stem + ".shard-" + std::to_string(shard) + "-of-" + std::to_string(shards) + ".safetensors";
}

void save_shard(const std::vector<TensorSlice>& slices, int shard, int shards, const std::string& path) {
  safetensors::NamedTensors tensors;
  safetensors::Metadata metadata{{"format", "pt"},
                                 {"acc", "FSDP SHARDED_STATE_DICT shard: 1-D slices of flattened tensors"},
                                 {"acc.shard", std::to_string(shard)},
                                 {"acc.shards", std::to_string(shards)}};
  for (const auto& slice : slices) {
    tensors.emplace_back(slice.name, slice.values.reshape({-1}));
    metadata.emplace_back(kRange + slice.name, std::to_string(slice.begin) + " " + std::to_string(slice.end));
    metadata.emplace_back(kShape + slice.name, join(slice.shape, ','));
  }
  safetensors::save_file(tensors, path, metadata);
}

ShardedTensors ShardedTensors::open_shards(const std::string& directory, const std::string& stem) {
  const std::regex pattern(std::regex_replace(stem, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
                           R"(\.shard-(\d{1,9})-of-(\d{1,9})\.safetensors)");  // fits an int
  std::map<int, std::string> found;
  int shards = -1;
  if (fs::is_directory(directory)) {
    for (const auto& entry : fs::directory_iterator(directory)) {
      const auto name = entry.path().filename().string();
      std::smatch match;
      if (!std::regex_match(name, match, pattern)) continue;
      const int count = std::stoi(match[2].str());
      if (shards != -1 && count != shards) {
        throw CheckpointError("acc: '" + directory + "' holds shards of '" + stem + "' from two saves (of " +
                              std::to_string(shards) + " and of " + std::to_string(count) +
                              " shards); remove the stale files or save again");
      }
      shards = count;
      found[std::stoi(match[1].str())] = entry.path().string();
    }
  }
  if (shards == -1) {
    throw CheckpointError("acc: '" + directory + "' has no " + stem + ".shard-*-of-*.safetensors files: it was not saved with FSDP SHARDED_STATE_DICT. Load it with the "
                          "state_dict_type it was saved with (FSDP_STATE_DICT_TYPE)");
  }
  ShardedTensors out;
  out.description_ = (fs::path(directory) / (stem + ".shard-*-of-" + std::to_string(shards) + ".safetensors")).string();
  for (int r = 0; r < shards; ++r) {
    if (!found.count(r)) {
      throw CheckpointError("acc: shard " + std::to_string(r) + " of " + std::to_string(shards) + " ('" +
                            shard_file_name(stem, r, shards) + "') is missing from '" + directory +
                            "'; every shard of a SHARDED_STATE_DICT checkpoint is needed to load it");
    }
    out.add(safetensors::MappedFile(found[r]), /*sliced=*/true);
  }
  return out;
}

ShardedTensors ShardedTensors::open_whole(const std::string& path) {
  ShardedTensors out;
  out.description_ = path;
  out.add(safetensors::MappedFile(path), /*sliced=*/false);
  return out;
}

void ShardedTensors::add(safetensors::MappedFile file, bool sliced) {
  const size_t index = files_.size();
  for (const auto& info : file.header().tensors) {
    auto& entry = tensors_[info.name];
    Piece piece{index, 0, numel_of(info.shape)};
    std::vector<int64_t> shape = info.shape;
    if (sliced) {
      const auto* range = find(file.metadata(), kRange + info.name);
      const auto* whole = find(file.metadata(), kShape + info.name);
      if (range == nullptr || whole == nullptr) {
        throw CheckpointError("acc: '" + file.path() + "' has no acc.range/acc.shape metadata for '" + info.name +
                              "': it is not a shard written by acc's SHARDED_STATE_DICT");
      }
      const auto bounds = split(*range, ' ');
      const auto whole_shape = split(*whole, ',');
      // The metadata's text is not repeated: only what is wrong with it.
      if (!bounds || !whole_shape || bounds->size() != 2 || (*bounds)[1] < (*bounds)[0] ||
          (*bounds)[1] - (*bounds)[0] != piece.end) {
        throw CheckpointError("acc: '" + file.path() + "': the acc.range/acc.shape metadata of '" + info.name +
                              "' is not two offsets and a shape spanning its " + std::to_string(piece.end) +
                              " elements: the shard is damaged or was not written by acc");
      }
      shape = *whole_shape;
      piece.begin = (*bounds)[0];
      piece.end = (*bounds)[1];
    }
    if (!entry.pieces.empty() && entry.shape != shape) {
      throw CheckpointError("acc: the shards disagree on the shape of '" + info.name + "'");
    }
    entry.shape = shape;
    entry.pieces.push_back(piece);
    std::sort(entry.pieces.begin(), entry.pieces.end(),
              [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  }
  files_.push_back(std::move(file));
}

std::vector<std::string> ShardedTensors::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : tensors_) out.push_back(name);
  return out;
}

const std::vector<int64_t>& ShardedTensors::shape(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw CheckpointError("acc: " + description_ + " has no tensor '" + name + "'");
  return it->second.shape;
}

at::ScalarType ShardedTensors::dtype(const std::string& name) const {
  shape(name);  // the error for a missing name
  const auto& piece = tensors_.at(name).pieces.front();
  return files_[piece.file].tensor(name).scalar_type();
}

void ShardedTensors::read(const std::string& name, int64_t begin, int64_t end, at::Tensor destination) const {
  shape(name);
  int64_t covered = begin;
  for (const auto& piece : tensors_.at(name).pieces) {
    if (piece.end <= covered || piece.begin > covered) continue;  // before the gap, or leaving one
    const int64_t to = std::min(piece.end, end);
    auto source = files_[piece.file].tensor(name).reshape({-1}).narrow(0, covered - piece.begin, to - covered);
    auto target = destination.narrow(0, covered - begin, to - covered);
    copy_into(target, source);
    covered = to;
    if (covered == end) break;
  }
  if (covered < end) {
    throw CheckpointError("acc: " + description_ + " does not hold elements " + std::to_string(covered) + ".." +
                          std::to_string(end) + " of '" + name + "': a shard is missing or was cut short");
  }
}

}  // namespace acc::detail

namespace acc {

std::vector<std::string> merge_sharded_weights(const std::string& checkpoint_dir, const std::string& output_dir) {
  static const std::regex first_shard(R"((model(_\d+)?)\.shard-0-of-\d+\.safetensors)");
  std::vector<std::string> stems;
  struct stat info {};
  if (::stat(checkpoint_dir.c_str(), &info) != 0) {
    throw CheckpointError("acc: checkpoint directory '" + checkpoint_dir + "' does not exist");
  }
  if (!S_ISDIR(info.st_mode)) {
    throw CheckpointError("acc: '" + checkpoint_dir + "' is " + detail::file_kind(info.st_mode) +
                          ", not a checkpoint directory; name the directory save_state wrote");
  }
  // Shards are opened through open_file: none that leads out of the checkpoint is read.
  const detail::ConfinedReads confined(checkpoint_dir);
  for (const auto& entry : fs::directory_iterator(checkpoint_dir)) {
    std::smatch match;
    const auto name = entry.path().filename().string();
    if (std::regex_match(name, match, first_shard)) stems.push_back(match[1].str());
  }
  if (stems.empty()) {
    throw CheckpointError("acc: '" + checkpoint_dir + "' has no model.shard-0-of-*.safetensors: it is not a "
                          "checkpoint saved with FSDP SHARDED_STATE_DICT (a FULL_STATE_DICT checkpoint's "
                          "model.safetensors is already whole)");
  }
  std::sort(stems.begin(), stems.end());
  fs::create_directories(output_dir);
  std::vector<std::string> written;
  for (const auto& stem : stems) {
    const auto shards = detail::ShardedTensors::open_shards(checkpoint_dir, stem);
    safetensors::NamedTensors whole;
    for (const auto& name : shards.names()) {
      auto tensor = at::empty(shards.shape(name), at::TensorOptions().dtype(shards.dtype(name)));
      shards.read(name, 0, tensor.numel(), tensor.view({-1}));
      whole.emplace_back(name, std::move(tensor));
    }
    const auto path = (fs::path(output_dir) / (stem + ".safetensors")).string();
    // Written whole or not at all: a reader never sees a half-written file under the final name.
    const auto partial = path + ".partial";
    safetensors::save_file(whole, partial);
    detail::sync_path(partial);
    fs::rename(partial, path);
    written.push_back(path);
  }
  return written;
}

}  // namespace acc
