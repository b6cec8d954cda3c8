// save_model / load_checkpoint_in_model: Accelerate's and the Hub's sharded weight layout.
#include <acc/checkpoint_model.h>

#include <c10/util/irange.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>

#include "checkpoint/archive_file.h"
#include "checkpoint/checksums.h"
#include "checkpoint/file_io.h"
#include "checkpoint/model_tensors.h"
#include "checkpoint/tensor_copy.h"
#include "checkpoint/weights_files.h"

namespace fs = std::filesystem;

namespace acc {
namespace {

void collect_state(const torch::nn::Module& module, const std::string& prefix,
                   safetensors::NamedTensors& out) {
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (item.value().defined()) out.emplace_back(prefix + item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (item.value().defined()) out.emplace_back(prefix + item.key(), item.value());
  }
  for (const auto& child : module.named_children()) {
    collect_state(*child.value(), prefix + child.key() + ".", out);
  }
}

// Two state entries are the same tensor when they view the same memory the same way.
using AliasKey = std::tuple<const void*, std::vector<int64_t>, std::vector<int64_t>, int>;
AliasKey alias_key(const at::Tensor& tensor) {
  return {tensor.data_ptr(), tensor.sizes().vec(), tensor.strides().vec(),
          static_cast<int>(tensor.scalar_type())};
}

std::string shard_file_name(const std::string& weights_name, size_t index, size_t count) {
  const auto dot = weights_name.rfind('.');
  char suffix[64];
  std::snprintf(suffix, sizeof(suffix), "-%05zu-of-%05zu", index + 1, count);
  return weights_name.substr(0, dot) + suffix + weights_name.substr(dot);
}

void write_pickle(const safetensors::NamedTensors& tensors, const std::string& path) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) dict.insert(name, tensor.to(at::kCPU));
  const auto bytes = torch::jit::pickle_save(dict);
  auto file = detail::create_file(path);
  file.write_all(bytes.data(), bytes.size());
  file.close();
}

safetensors::NamedTensors read_pickle(const std::string& path) {
  const std::string text = detail::read_checkpoint_file(path);
  c10::IValue value;
  detail::read_values(path, [&] { value = torch::jit::pickle_load(std::vector<char>(text.begin(), text.end())); });
  if (!value.isGenericDict()) {
    throw CheckpointError("acc: '" + path + "' does not hold a dict of tensors");
  }
  safetensors::NamedTensors out;
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString() || !entry.value().isTensor()) {
      throw CheckpointError("acc: '" + path + "' holds an entry that is not a name -> tensor pair");
    }
    out.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
  }
  return out;
}

// The checkpoint's tensors (mapped, not copied, for safetensors) from a file, index or directory.
safetensors::NamedTensors read_checkpoint(const std::string& path) {
  safetensors::NamedTensors out;
  for (const auto& file : detail::weights_files(path)) {
    for (auto& entry : file.pickle ? read_pickle(file.path) : safetensors::load_file(file.path)) {
      if (!file.names.empty() && file.names.count(entry.first) == 0) {
        throw CheckpointError("acc: shard '" + file.path + "' holds '" + entry.first +
                              "', which the index '" + path + "' maps elsewhere or not at all");
      }
      out.push_back(std::move(entry));
    }
  }
  return out;
}

}  // namespace

namespace detail {

std::vector<WeightsFile> weights_files(const std::string& path) {
  fs::path location(path);
  if (fs::is_directory(location)) {
    for (const char* name : {"model.safetensors.index.json", "model.safetensors",
                             "pytorch_model.bin.index.json", "pytorch_model.bin"}) {
      if (fs::exists(location / name)) return weights_files((location / name).string());
    }
    throw CheckpointError("acc: '" + path + "' holds no model.safetensors(.index.json) or "
                          "pytorch_model.bin(.index.json); pass the weights file or index itself");
  }
  if (!fs::exists(location)) throw CheckpointError("acc: checkpoint '" + path + "' does not exist");
  const std::string extension = location.extension().string();
  if (extension == ".json") {
    const auto index = safetensors::parse_index(read_text_file(path), path);
    std::map<std::string, std::set<std::string>> names_by_file;
    for (const auto& [name, file] : index.weight_map) names_by_file[file].insert(name);
    std::vector<WeightsFile> files;
    for (auto& [file, names] : names_by_file) {
      auto shard = weights_files((location.parent_path() / file).string()).front();
      shard.names = std::move(names);
      files.push_back(std::move(shard));
    }
    return files;
  }
  return {{path, {}, extension == ".bin" || extension == ".pt" || extension == ".pth"}};
}

}  // namespace detail

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// Tied weights: safetensors cannot alias, so each tensor is written once under its first name.
safetensors::NamedTensors unique_model_state(const torch::nn::Module& module) {
  safetensors::NamedTensors state;
  std::set<AliasKey> seen;
  for (auto& entry : model_state(module)) {
    if (seen.insert(alias_key(entry.second)).second) state.push_back(std::move(entry));
  }
  return state;
}

}  // namespace

void save_model_file(const torch::nn::Module& module, const std::string& path) {
  safetensors::save_file(unique_model_state(module), path);
}

void detail::save_model_file_with_prefix(const torch::nn::Module& module, const std::string& path,
                                         const std::string& prefix) {
  auto state = unique_model_state(module);
  for (auto& entry : state) entry.first = prefix + entry.first;
  safetensors::save_file(state, path);
}

safetensors::NamedTensors model_state(const torch::nn::Module& module) {
  safetensors::NamedTensors out;
  collect_state(module, "", out);
  return out;
}

uint64_t parse_shard_size(const std::string& text) {
  static const std::regex pattern(R"(\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B)?\s*)", std::regex::icase);
  std::smatch match;
  if (!std::regex_match(text, match, pattern)) {
    throw ConfigError("acc: max_shard_size '" + text + "' is not a size; use a number of bytes or a "
                      "number with KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB (powers of 1024), "
                      "e.g. \"10GB\"");
  }
  const double value = std::stod(match[1].str());
  std::string unit = match[2].str();
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const bool binary = unit.size() == 3;
  const double base = binary ? 1024.0 : 1000.0;
  int power = 0;
  if (!unit.empty()) power = static_cast<int>(std::string("KMGT").find(unit[0])) + 1;
  double bytes = value;
  for (int i = 0; i < power; ++i) bytes *= base;
  if (bytes < 1) throw ConfigError("acc: max_shard_size '" + text + "' must be at least one byte");
  return static_cast<uint64_t>(bytes);
}

std::vector<Shard> plan_shards(const safetensors::NamedTensors& state, uint64_t max_shard_size,
                               const std::string& weights_name) {
  std::vector<Shard> shards;
  Shard current;
  uint64_t current_size = 0;
  for (size_t i = 0; i < state.size(); ++i) {
    const uint64_t size = state[i].second.nbytes();
    if (size > max_shard_size) {
      shards.push_back(Shard{"", {i}});
      continue;
    }
    if (current_size + size > max_shard_size && !current.tensors.empty()) {
      shards.push_back(std::move(current));
      current = Shard{};
      current_size = 0;
    }
    current.tensors.push_back(i);
    current_size += size;
  }
  if (!current.tensors.empty() || shards.empty()) shards.push_back(std::move(current));
  for (size_t i = 0; i < shards.size(); ++i) {
    shards[i].file = shards.size() == 1 ? weights_name : shard_file_name(weights_name, i, shards.size());
  }
  return shards;
}

void save_model(const torch::nn::Module& module, const std::string& directory,
                const std::string& max_shard_size, bool safe_serialization) {
  if (fs::exists(directory) && !fs::is_directory(directory)) {
    throw CheckpointError("acc: save_model needs a directory, but '" + directory + "' is a file");
  }
  fs::create_directories(directory);
  const uint64_t limit = parse_shard_size(max_shard_size);
  const auto state = unique_model_state(module);
  const std::string weights_name = safe_serialization ? "model.safetensors" : "pytorch_model.bin";
  const std::string index_name = weights_name + ".index.json";
  const auto shards = plan_shards(state, limit, weights_name);

  std::set<std::string> written;
  safetensors::ShardIndex index;
  for (const auto& shard : shards) {
    safetensors::NamedTensors tensors;
    for (size_t i : shard.tensors) {
      tensors.push_back(state[i]);
      index.total_size += state[i].second.nbytes();
      index.weight_map.emplace_back(state[i].first, shard.file);
    }
    const auto path = (fs::path(directory) / shard.file).string();
    detail::write_file_atomically(path, [&](const std::string& temporary) {
      if (safe_serialization) {
        safetensors::save_file(tensors, temporary);
      } else {
        write_pickle(tensors, temporary);
      }
    });
    written.insert(shard.file);
  }
  const auto index_path = fs::path(directory) / index_name;
  if (shards.size() > 1) {
    std::sort(index.weight_map.begin(), index.weight_map.end());
    detail::write_file_atomically(index_path.string(), [&](const std::string& temporary) {
      detail::write_text_file(temporary, safetensors::serialize_index(index));
    });
    written.insert(index_name);
  }
  // Files of an earlier save that would now mislead a loader: other shards, and the index or
  // single file of the other layout.
  const auto stem = weights_name.substr(0, weights_name.rfind('.'));
  const auto extension = weights_name.substr(weights_name.rfind('.'));
  const std::regex shard_pattern(std::regex_replace(stem, std::regex(R"(\.)"), R"(\.)") +
                                 R"(-\d{5}-of-\d{5})" +
                                 std::regex_replace(extension, std::regex(R"(\.)"), R"(\.)"));
  for (const auto& entry : fs::directory_iterator(directory)) {
    const auto name = entry.path().filename().string();
    if (!entry.is_regular_file() || written.count(name)) continue;
    if (std::regex_match(name, shard_pattern) || name == index_name || name == weights_name) {
      detail::remove_tree(entry.path().string());
    }
  }
  detail::sync_path(directory);
}

std::string LoadReport::describe() const {
  std::ostringstream out;
  if (!missing_keys.empty()) {
    out << "missing keys (in the model, not in the checkpoint):";
    for (const auto& key : missing_keys) out << " " << key;
    out << "\n";
  }
  if (!unexpected_keys.empty()) {
    out << "unexpected keys (in the checkpoint, not in the model):";
    for (const auto& key : unexpected_keys) out << " " << key;
    out << "\n";
  }
  if (!mismatched_keys.empty()) {
    out << "mis-shaped keys:";
    for (const auto& key : mismatched_keys) {
      out << " " << key.name << " (model " << shape_text(key.model_shape) << ", checkpoint "
          << shape_text(key.checkpoint_shape) << ")";
    }
    out << "\n";
  }
  return out.str();
}

LoadReport load_checkpoint_in_model(torch::nn::Module& module, const std::string& path, bool strict) {
  std::map<std::string, at::Tensor> checkpoint;
  for (auto& [name, tensor] : read_checkpoint(path)) checkpoint.emplace(name, std::move(tensor));
  return detail::load_named_tensors(module, std::move(checkpoint), path, strict);
}

LoadReport detail::load_named_tensors(torch::nn::Module& module, std::map<std::string, at::Tensor> checkpoint,
                                      const std::string& path, bool strict) {
  const auto model = model_state(module);

  LoadReport report;
  std::set<AliasKey> loaded;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (destination, source)
  for (const auto& [name, tensor] : model) {
    auto found = checkpoint.find(name);
    if (found == checkpoint.end()) continue;
    if (found->second.sizes() != tensor.sizes()) {
      report.mismatched_keys.push_back({name, tensor.sizes().vec(), found->second.sizes().vec()});
      continue;
    }
    copies.emplace_back(tensor, found->second);
    loaded.insert(alias_key(tensor));
  }
  std::set<std::string> model_names;
  for (const auto& [name, tensor] : model) {
    model_names.insert(name);
    if (checkpoint.count(name) == 0 && loaded.count(alias_key(tensor)) == 0) {
      report.missing_keys.push_back(name);
    }
  }
  for (const auto& [name, tensor] : checkpoint) {
    if (model_names.count(name) == 0) report.unexpected_keys.push_back(name);
  }
  if (!report.mismatched_keys.empty() || (strict && !report.ok())) {
    throw CheckpointError("acc: the checkpoint '" + path + "' does not match the model:\n" +
                          report.describe() +
                          "Load into a model of the same structure, or pass strict=false to load the "
                          "matching keys only.");
  }
  torch::NoGradGuard no_grad;
  for (auto& [destination, source] : copies) detail::copy_into(destination, source);
  return report;
}

}  // namespace acc
