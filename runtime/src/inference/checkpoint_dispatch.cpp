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

struct Source {
  size_t shard = 0;
  std::string name;  // in the checkpoint
  at::ScalarType dtype = at::kFloat;
};

}  // namespace

DispatchReport load_checkpoint_and_dispatch(torch::nn::Module& model, const std::string& checkpoint,
                                            const DeviceMap& device_map,
                                            const DispatchOptions& options) {
  detail::check_device_map(model, device_map);
  detail::check_hooks_can_run(model, device_map, options);
  if (options.dtype() && !at::isFloatingType(*options.dtype())) {
    throw ConfigError(std::string("acc: dtype ") + c10::toString(*options.dtype()) +
                      " is not a floating-point type; weights are converted only to float, "
                      "double, half or bfloat16");
  }
  std::vector<bool> is_buffer;
  const auto tensors = detail::unique_tensors(model, &is_buffer);
  const auto shards = checkpoint_shards(checkpoint);
  const c10::Device main = detail::main_device(device_map, options);

  // Every name of each model tensor (tied weights have several), to find it under any of them.
  std::unordered_map<const void*, size_t> index_of;
  for (const auto i : c10::irange(tensors.size())) index_of[tensors[i].second.unsafeGetTensorImpl()] = i;
  std::unordered_map<std::string, size_t> tensor_named;
  for (const auto& [name, tensor] : model_state(model)) tensor_named[name] = index_of.at(tensor.unsafeGetTensorImpl());

  // Pass 1, headers only: every tensor found once, shapes and dtypes convertible.
  std::vector<std::optional<Source>> sources(tensors.size());
  std::vector<std::string> problems, unexpected;
  std::vector<safetensors::Header> headers;
  for (const auto s : c10::irange(shards.size())) {
    headers.push_back(safetensors::read_header(shards[s].path));
    const std::string& path = shards[s].path;
    for (const auto& info : headers.back().tensors) {
      if (!shards[s].names.empty() && shards[s].names.count(info.name) == 0) {
        throw CheckpointError("acc: shard '" + path + "' holds '" + info.name + "', which the index of '" +
                              checkpoint + "' maps elsewhere or not at all");
      }
      auto found = tensor_named.find(info.name);
      if (found == tensor_named.end()) {
        unexpected.push_back(info.name);
        continue;
      }
      const auto& tensor = tensors[found->second].second;
      if (tensor.sizes() != at::IntArrayRef(info.shape)) {
        problems.push_back("'" + info.name + "' of " + module_of(info.name) + " is " +
                           shape_text(tensor.sizes()) + " in the model but " +
                           shape_text(info.shape) + " in " + path);
        continue;
      }
      const auto dtype = safetensors::to_torch(info.dtype);
      if (at::isFloatingType(dtype) != at::isFloatingType(tensor.scalar_type())) {
        problems.push_back("'" + info.name + "' of " + module_of(info.name) + " is " +
                           c10::toString(tensor.scalar_type()) + " in the model but " +
                           c10::toString(dtype) + " in " + path +
                           ", which acc does not convert (floating point to integer or back)");
        continue;
      }
      if (!sources[found->second]) sources[found->second] = Source{s, info.name, dtype};
    }
  }
  for (const auto i : c10::irange(tensors.size())) {
    if (!sources[i]) {
      problems.push_back("'" + tensors[i].first + "' of " + module_of(tensors[i].first) +
                         " is not in the checkpoint");
    }
  }
  if (!problems.empty()) {
    std::string text = "acc: the checkpoint '" + checkpoint + "' does not fit the model:\n";
    for (const auto& problem : problems) text += "  " + problem + "\n";
    throw CheckpointError(text + "Nothing was loaded. Build the model with the structure the "
                                 "checkpoint was saved from (names as in named_parameters()).");
  }
  if (!unexpected.empty()) {
    detail::warn("acc: load_checkpoint_and_dispatch ignored " + std::to_string(unexpected.size()) +
                 " weight(s) of '" + checkpoint + "' that the model does not have, e.g. '" +
                 unexpected.front() + "'");
  }

  // Where each tensor goes, and its dtype there.
  std::vector<std::string> placement(tensors.size());
  std::vector<at::ScalarType> dtype(tensors.size());
  bool needs_folder = false;
  for (const auto i : c10::irange(tensors.size())) {
    placement[i] = *device_map.device_of(tensors[i].first);
    if (is_buffer[i] && !options.offload_buffers() && (placement[i] == "disk" || placement[i] == "cpu")) {
      placement[i] = main.str();  // buffers stay where their module runs (Accelerate's default)
    }
    const auto source_dtype = sources[i]->dtype;
    dtype[i] = at::isFloatingType(source_dtype)
                   ? options.dtype().value_or(tensors[i].second.scalar_type())
                   : tensors[i].second.scalar_type();
    if (placement[i] == "disk" && dtype[i] != source_dtype) needs_folder = true;
  }
  if (needs_folder && options.offload_folder().empty()) {
    throw ConfigError("acc: weights mapped to \"disk\" need converting to another dtype, so they "
                      "are written once to an offload folder; set DispatchOptions().offload_folder(dir)");
  }
  remove_hooks(model);  // every check passed: an earlier dispatch's weights resident, then replaced

  // Pass 2, one shard at a time.
  std::vector<detail::PlacedTensor> placed(tensors.size());
  {
    torch::NoGradGuard no_grad;
    for (const auto s : c10::irange(shards.size())) {
      // Mapped only when something is read from it: weights that stay on disk need the header.
      std::optional<safetensors::MappedFile> mapped;
      auto file = [&]() -> const safetensors::MappedFile& {
        if (!mapped) mapped.emplace(shards[s].path);
        return *mapped;
      };
      std::shared_ptr<const detail::FileHandle> open_shard;  // what its disk weights read from
      safetensors::NamedTensors converted;
      std::vector<size_t> converted_index;
      for (const auto i : c10::irange(tensors.size())) {
        if (sources[i]->shard != s) continue;
        auto& out = placed[i];
        out.name = tensors[i].first;
        out.tensor = tensors[i].second;
        out.placement = placement[i];
        out.buffer = is_buffer[i];
        if (placement[i] == "disk") {
          if (dtype[i] == sources[i]->dtype) {
            if (!open_shard) open_shard = std::make_shared<const detail::FileHandle>(detail::open_file(shards[s].path));
            out.disk = detail::disk_weight(open_shard, headers[s], sources[i]->name);
          } else {
            converted.emplace_back(tensors[i].first, file().tensor(sources[i]->name).to(dtype[i]));
            converted_index.push_back(i);
          }
          continue;
        }
        const c10::Device device(placement[i]);
        auto value = file().tensor(sources[i]->name);
        if (device.is_cpu() && value.scalar_type() == dtype[i]) {
          // As Python's safetensors: the mapping itself (copy-on-write), its pages read ahead now
          // and kept by the page cache; a copy would first need as much fresh anonymous memory.
          detail::read_ahead(value);
        } else {
          value = value.to(device, dtype[i], /*non_blocking=*/false, /*copy=*/true);
        }
        detail::replace_data(out.tensor, value);
      }
      if (!converted.empty()) {
        const auto written = detail::write_disk_weights(converted, options.offload_folder(),
                                                        fs::path(shards[s].path).stem().string());
        for (const auto k : c10::irange(written.size())) placed[converted_index[k]].disk = written[k];
      }
    }
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
