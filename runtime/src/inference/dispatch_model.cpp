// dispatch_model and its shortcuts, for models whose weights are already loaded.
#include <c10/util/irange.h>

#include <atomic>
#include <filesystem>

#include <unistd.h>

#include <acc/big_modeling.h>
#include <acc/errors.h>

#include "inference/dispatch.h"

namespace fs = std::filesystem;

namespace acc {
namespace {

// Each child of the root, and the root's own weights, on `device`: a custom root's forward is
// the user's, so its children are the modules whose calls acc can see.
DeviceMap children_map(const torch::nn::Module& model, const std::string& device) {
  DeviceMap map;
  for (const auto& item : model.named_parameters(/*recurse=*/false)) map.set(item.key(), device);
  for (const auto& child : model.named_children()) map.set(child.key(), device);
  for (const auto& item : model.named_buffers(/*recurse=*/false)) map.set(item.key(), device);
  if (map.empty()) map.set("", device);
  return map;
}

std::string unique_offload_file(const std::string& folder) {
  static std::atomic<int> counter{0};
  return (fs::path(folder) / ("acc-offload-" + std::to_string(::getpid()) + "-" +
                              std::to_string(counter++) + ".safetensors"))
      .string();
}

}  // namespace

DispatchReport dispatch_model(torch::nn::Module& model, const DeviceMap& device_map,
                              const DispatchOptions& options) {
  detail::check_device_map(model, device_map);
  remove_hooks(model);  // an earlier dispatch's weights resident, before they are replaced
  std::vector<bool> is_buffer;
  const auto tensors = detail::unique_tensors(model, &is_buffer);
  for (const auto& [name, tensor] : tensors) {
    if (tensor.is_meta()) {
      throw ConfigError("acc: '" + name + "' is empty (built under acc::init_empty_weights); "
                        "dispatch_model places loaded weights: use acc::load_checkpoint_and_dispatch");
    }
  }
  const c10::Device main = detail::main_device(device_map, options);
  std::vector<detail::PlacedTensor> placed(tensors.size());
  safetensors::NamedTensors to_disk;
  std::vector<size_t> disk_index;
  for (const auto i : c10::irange(tensors.size())) {
    auto& out = placed[i];
    out.name = tensors[i].first;
    out.tensor = tensors[i].second;
    out.buffer = is_buffer[i];
    out.placement = *device_map.device_of(out.name);
    if (out.buffer && !options.offload_buffers() && (out.placement == "disk" || out.placement == "cpu")) {
      out.placement = main.str();
    }
    if (out.placement == "disk") {
      to_disk.emplace_back(out.name, out.tensor);
      disk_index.push_back(i);
    }
  }
  if (!to_disk.empty()) {
    if (options.offload_folder().empty()) {
      throw ConfigError("acc: the device map puts weights on \"disk\", so dispatch_model writes them "
                        "to an offload folder; set DispatchOptions().offload_folder(dir)");
    }
    fs::create_directories(options.offload_folder());
    const auto written = detail::write_disk_weights(to_disk, unique_offload_file(options.offload_folder()));
    for (const auto k : c10::irange(written.size())) placed[disk_index[k]].disk = written[k];
  }
  {
    torch::NoGradGuard no_grad;
    for (auto& tensor : placed) {
      if (tensor.placement == "disk") continue;
      const c10::Device device(tensor.placement);
      if (tensor.tensor.device() != device) detail::replace_data(tensor.tensor, tensor.tensor.to(device));
    }
  }
  return detail::attach_dispatch(model, device_map, std::move(placed), options);
}

DispatchReport cpu_offload(torch::nn::Module& model, c10::Device execution_device) {
  return dispatch_model(model, children_map(model, "cpu"),
                        DispatchOptions().execution_device(execution_device));
}

DispatchReport disk_offload(torch::nn::Module& model, const std::string& folder,
                            c10::Device execution_device) {
  return dispatch_model(model, children_map(model, "disk"),
                        DispatchOptions().offload_folder(folder).execution_device(execution_device));
}

}  // namespace acc
