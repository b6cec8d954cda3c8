#pragma once
// Model weights in Accelerate's and the Hugging Face Hub's layout: save_model writes
// model.safetensors, or model-0000i-of-0000N.safetensors shards plus model.safetensors.index.json;
// load_checkpoint_in_model reads a file, an index or a directory back into a module.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <acc/errors.h>
#include <acc/safetensors.h>

namespace acc {

/// The module's parameters and buffers in PyTorch's state_dict order (each module's own
/// parameters, then its buffers, then its children), named as in named_parameters/named_buffers.
safetensors::NamedTensors model_state(const torch::nn::Module& module);

/// "10GB" = 10*10^9 bytes, "5MB", "100KB", "1TB" (the Hub's units), "2GiB"/"512MiB"/"4KiB" (powers
/// of 1024), or a plain number of bytes. ConfigError on anything else.
uint64_t parse_shard_size(const std::string& text);

/// One shard: its file name and the indices of its tensors in the state.
struct Shard {
  std::string file;
  std::vector<size_t> tensors;
};

/// Greedy packing in state order as huggingface_hub does: a tensor larger than the limit gets a
/// shard of its own, otherwise a shard is closed when the next tensor would overflow it.
/// `weights_name` is "model.safetensors" or "pytorch_model.bin".
std::vector<Shard> plan_shards(const safetensors::NamedTensors& state, uint64_t max_shard_size,
                               const std::string& weights_name);

/// Writes the module's weights to `directory` (created if needed). Tensors that alias each other
/// exactly (tied weights) are written once under the first name, as Accelerate does. Shards of an
/// earlier save that the new one does not overwrite are removed. safe_serialization=false writes
/// pytorch_model*.bin (libtorch pickles, read by
/// torch.load(weights_only=False)) instead. Every file is written under a
/// temporary name, fsynced and renamed, so a crash leaves either the old or the new file.
void save_model(const torch::nn::Module& module, const std::string& directory,
                const std::string& max_shard_size = "10GB", bool safe_serialization = true);

/// One model.safetensors-style file (no sharding), tied weights written once: what save_state
/// writes for each prepared model.
void save_model_file(const torch::nn::Module& module, const std::string& path);

struct MismatchedKey {
  std::string name;
  std::vector<int64_t> model_shape;
  std::vector<int64_t> checkpoint_shape;
};

/// What load_checkpoint_in_model found.
struct LoadReport {
  std::vector<std::string> missing_keys;     // in the model, not in the checkpoint
  std::vector<std::string> unexpected_keys;  // in the checkpoint, not in the model
  std::vector<MismatchedKey> mismatched_keys;
  bool ok() const { return missing_keys.empty() && unexpected_keys.empty() && mismatched_keys.empty(); }
  /// Lists every problem, one per line.
  std::string describe() const;
};

/// Loads weights into `module` (in place, on the module's devices and dtypes) from `path`: a
/// .safetensors file, a .bin file, an index .json, or a directory holding one of
/// model.safetensors.index.json, model.safetensors, pytorch_model.bin.index.json,
/// pytorch_model.bin. With `strict`, any missing, unexpected or mis-shaped key is a
/// CheckpointError listing all of them and nothing is loaded; otherwise matching keys are loaded
/// and the report returned. Keys tied to a loaded key are not missing.
LoadReport load_checkpoint_in_model(torch::nn::Module& module, const std::string& path,
                                    bool strict = true);

namespace detail {
template <typename T>
torch::nn::Module& module_ref(T& model) {
  if constexpr (std::is_base_of_v<torch::nn::Module, T>) {
    return model;
  } else if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, T>) {
    return *model.ptr();
  } else {
    return module_ref(*model);  // shared_ptr or pointer
  }
}
}  // namespace detail

/// Overloads for shared_ptr<Net>, TORCH_MODULE holders and pointers.
template <typename Model, typename = std::enable_if_t<!std::is_base_of_v<torch::nn::Module, Model>>>
void save_model(const Model& model, const std::string& directory,
                const std::string& max_shard_size = "10GB", bool safe_serialization = true) {
  save_model(detail::module_ref(const_cast<Model&>(model)), directory, max_shard_size,
             safe_serialization);
}
template <typename Model, typename = std::enable_if_t<!std::is_base_of_v<torch::nn::Module, Model>>>
LoadReport load_checkpoint_in_model(Model& model, const std::string& path, bool strict = true) {
  return load_checkpoint_in_model(detail::module_ref(model), path, strict);
}

}  // namespace acc
