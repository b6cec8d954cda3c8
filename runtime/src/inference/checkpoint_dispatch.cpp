// load_checkpoint_and_dispatch: a checkpoint read one shard at a time into a model (empty or
// not), each weight straight to where the device map puts it, then dispatched.
#include <ATen/ops/empty.h>
#include <c10/util/irange.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <acc/big_modeling.h>
#include <acc/errors.h>
#include <acc/safetensors.h>
#include <acc/warnings.h>

#include "checkpoint/file_io.h"
#include "checkpoint/weights_files.h"
#include "inference/dispatch.h"

namespace fs = std::filesystem;

namespace acc {
namespace {

// The checkpoint's files, which must be safetensors: a pickle cannot be read one tensor at a time.
std::vector<detail::WeightsFile> checkpoint_shards(const std::string& checkpoint) {
  auto files = detail::weights_files(checkpoint);
  for (const auto& file : files) {
    if (!file.pickle) continue;
    throw CheckpointError("acc: load_checkpoint_and_dispatch reads safetensors checkpoints; '" + file.path +
                          "' is a pickle, which cannot be read one tensor at a time (load it with "
                          "acc::load_checkpoint_in_model and call acc::dispatch_model, or save it again "
                          "with acc::save_model)");
  }
  return files;
}

std::string shape_text(at::IntArrayRef shape) {
  std::ostringstream out;
  out << shape;
  return out.str();
}

// The module a weight belongs to, for messages.
std::string module_of(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? std::string("the root module") : "module '" + name.substr(0, dot) + "'";
}

void check_dtype(const DispatchOptions& options) {
  if (options.dtype() && !at::isFloatingType(*options.dtype())) {
    throw ConfigError(std::string("acc: dtype ") + c10::toString(*options.dtype()) +
                      " is not a floating-point type; weights are converted only to float, "
                      "double, half or bfloat16");
  }
}

// Where a model tensor is read from.
struct Source {
  size_t shard = 0;
  std::string name;  // in the checkpoint
  at::ScalarType dtype = at::kFloat;
};

// Pass 1, headers only: each model tensor found once, its shape the same and its dtype convertible.
class HeaderPass {
 public:
  HeaderPass(const torch::nn::Module& model, const std::vector<detail::PlacedTensor>& tensors,
             const std::vector<detail::WeightsFile>& shards, const std::string& checkpoint)
      : tensors_(tensors), shards_(shards), checkpoint_(checkpoint), sources_(tensors.size()) {
    // Every name of each model tensor (tied weights have several), to find it under any of them.
    std::unordered_map<const void*, size_t> index_of;
    for (const auto i : c10::irange(tensors.size())) index_of[tensors[i].tensor.unsafeGetTensorImpl()] = i;
    for (const auto& [name, tensor] : model_state(model)) tensor_named_[name] = index_of.at(tensor.unsafeGetTensorImpl());
  }

  // Reads every shard's header, then throws CheckpointError listing every tensor that does not fit
  // (nothing is loaded then), and warns of the checkpoint's weights the model lacks.
  void run() {
    for (const auto s : c10::irange(shards_.size())) {
      headers_.push_back(safetensors::read_header(shards_[s].path));
      for (const auto& info : headers_.back().tensors) match(s, info);
    }
    for (const auto i : c10::irange(tensors_.size())) {
      if (!sources_[i]) {
        problems_.push_back("'" + tensors_[i].name + "' of " + module_of(tensors_[i].name) +
                            " is not in the checkpoint");
      }
    }
    if (!problems_.empty()) {
      std::string text = "acc: the checkpoint '" + checkpoint_ + "' does not fit the model:\n";
      for (const auto& problem : problems_) text += "  " + problem + "\n";
      throw CheckpointError(text + "Nothing was loaded. Build the model with the structure the "
                                   "checkpoint was saved from (names as in named_parameters()).");
    }
    if (!unexpected_.empty()) {
      detail::warn("acc: load_checkpoint_and_dispatch ignored " + std::to_string(unexpected_.size()) +
                   " weight(s) of '" + checkpoint_ + "' that the model does not have, e.g. '" +
                   unexpected_.front() + "'");
    }
  }

  // After run(): where each model tensor is read from.
  const Source& source(size_t tensor) const { return *sources_[tensor]; }
  const safetensors::Header& header(size_t shard) const { return headers_[shard]; }

 private:
  void match(size_t s, const safetensors::TensorInfo& info) {
    const std::string& path = shards_[s].path;
    if (!shards_[s].names.empty() && shards_[s].names.count(info.name) == 0) {
      throw CheckpointError("acc: shard '" + path + "' holds '" + info.name + "', which the index of '" +
                            checkpoint_ + "' maps elsewhere or not at all");
    }
    auto found = tensor_named_.find(info.name);
    if (found == tensor_named_.end()) {
      unexpected_.push_back(info.name);
      return;
    }
    const auto& tensor = tensors_[found->second].tensor;
    if (tensor.sizes() != at::IntArrayRef(info.shape)) {
      problems_.push_back("'" + info.name + "' of " + module_of(info.name) + " is " + shape_text(tensor.sizes()) +
                          " in the model but " + shape_text(info.shape) + " in " + path);
      return;
    }
    const auto dtype = safetensors::to_torch(info.dtype);
    if (at::isFloatingType(dtype) != at::isFloatingType(tensor.scalar_type())) {
      problems_.push_back("'" + info.name + "' of " + module_of(info.name) + " is " +
                          c10::toString(tensor.scalar_type()) + " in the model but " + c10::toString(dtype) +
                          " in " + path + ", which acc does not convert (floating point to integer or back)");
      return;
    }
    if (!sources_[found->second]) sources_[found->second] = Source{s, info.name, dtype};
  }

  const std::vector<detail::PlacedTensor>& tensors_;
  const std::vector<detail::WeightsFile>& shards_;
  const std::string& checkpoint_;
  std::unordered_map<std::string, size_t> tensor_named_;
  std::vector<std::optional<Source>> sources_;
  std::vector<safetensors::Header> headers_;
  std::vector<std::string> problems_, unexpected_;
};

// Each tensor's dtype where it goes: options.dtype for floating-point weights, else the model's.
// ConfigError when "disk" weights need converting and there is no offload folder to write them to.
std::vector<at::ScalarType> target_dtypes(const std::vector<detail::PlacedTensor>& tensors, const HeaderPass& headers,
                                          const DispatchOptions& options) {
  std::vector<at::ScalarType> dtype(tensors.size());
  bool needs_folder = false;
  for (const auto i : c10::irange(tensors.size())) {
    const auto source_dtype = headers.source(i).dtype;
    dtype[i] = at::isFloatingType(source_dtype) ? options.dtype().value_or(tensors[i].tensor.scalar_type())
                                                : tensors[i].tensor.scalar_type();
    if (tensors[i].placement == "disk" && dtype[i] != source_dtype) needs_folder = true;
  }
  if (needs_folder && options.offload_folder().empty()) {
    throw ConfigError("acc: weights mapped to \"disk\" need converting to another dtype, so they "
                      "are written once to an offload folder; set DispatchOptions().offload_folder(dir)");
  }
  return dtype;
}

// `value`, a tensor of the mapped shard, into the model's tensor `out`, on its device and in `dtype`.
void load_to_device(at::Tensor value, at::ScalarType dtype, const detail::PlacedTensor& out) {
  const c10::Device device(out.placement);
  if (device.is_cpu() && value.scalar_type() == dtype) {
    // As Python's safetensors: the mapping itself (copy-on-write), its pages read ahead now
    // and kept by the page cache; a copy would first need as much fresh anonymous memory.
    detail::read_ahead(value);
  } else {
    value = value.to(device, dtype, /*non_blocking=*/false, /*copy=*/true);
  }
  detail::replace_data(out.tensor, value);
}

// Pass 2 for shard `s`: its weights to their devices, or described on disk (in the shard, or
// converted into the offload folder).
void load_shard(size_t s, const detail::WeightsFile& shard, const HeaderPass& headers,
                const std::vector<at::ScalarType>& dtype, const DispatchOptions& options,
                std::vector<detail::PlacedTensor>& placed) {
  // Mapped only when something is read from it: weights that stay on disk need the header.
  std::optional<safetensors::MappedFile> mapped;
  auto file = [&]() -> const safetensors::MappedFile& {
    if (!mapped) mapped.emplace(shard.path);
    return *mapped;
  };
  std::shared_ptr<const detail::FileHandle> open_shard;  // what its disk weights read from
  safetensors::NamedTensors converted;
  std::vector<size_t> converted_index;
  for (const auto i : c10::irange(placed.size())) {
    const Source& source = headers.source(i);
    if (source.shard != s) continue;
    auto& out = placed[i];
    if (out.placement == "disk") {
      if (dtype[i] == source.dtype) {
        if (!open_shard) open_shard = std::make_shared<const detail::FileHandle>(detail::open_file(shard.path));
        out.disk = detail::disk_weight(open_shard, headers.header(s), source.name);
      } else {
        converted.emplace_back(out.name, file().tensor(source.name).to(dtype[i]));
        converted_index.push_back(i);
      }
      continue;
    }
    load_to_device(file().tensor(source.name), dtype[i], out);
  }
  if (!converted.empty()) {
    const auto written =
        detail::write_disk_weights(converted, options.offload_folder(), fs::path(shard.path).stem().string());
    for (const auto k : c10::irange(written.size())) placed[converted_index[k]].disk = written[k];
  }
}

}  // namespace

DispatchReport load_checkpoint_and_dispatch(torch::nn::Module& model, const std::string& checkpoint,
                                            const DeviceMap& device_map,
                                            const DispatchOptions& options) {
  auto placed = detail::plan_dispatch(model, device_map, options);
  check_dtype(options);
  const auto shards = checkpoint_shards(checkpoint);
  HeaderPass headers(model, placed, shards, checkpoint);
  headers.run();
  const auto dtype = target_dtypes(placed, headers, options);
  remove_hooks(model);  // every check passed: an earlier dispatch's weights resident, then replaced
  {
    torch::NoGradGuard no_grad;
    for (const auto s : c10::irange(shards.size())) load_shard(s, shards[s], headers, dtype, options, placed);
  }
  return detail::attach_dispatch(model, device_map, std::move(placed), options);
}

DispatchReport load_checkpoint_and_dispatch(torch::nn::Module& model, const std::string& checkpoint,
                                            const std::string& device_map,
                                            const DispatchOptions& options) {
  auto auto_options = AutoDeviceMapOptions()
                          .max_memory(options.max_memory())
                          .no_split_module_classes(options.no_split_module_classes())
                          .dtype(options.dtype())
                          .offload_buffers(options.offload_buffers());
  return load_checkpoint_and_dispatch(model, checkpoint,
                                      resolve_device_map(model, device_map, auto_options), options);
}

}  // namespace acc
