// dispatch_model and its shortcuts, for models whose weights are already loaded.
#include <c10/util/irange.h>

#include <acc/big_modeling.h>
#include <acc/errors.h>

#include "inference/dispatch.h"

namespace acc {
DispatchReport dispatch_model(torch::nn::Module& model, const DeviceMap& device_map,
                              const DispatchOptions& options) {
  auto placed = detail::plan_dispatch(model, device_map, options);
  std::vector<size_t> disk_index;
  for (const auto i : c10::irange(placed.size())) {
    if (placed[i].placement == "disk") disk_index.push_back(i);
  }
  if (!disk_index.empty() && options.offload_folder().empty()) {
    throw ConfigError("acc: the device map puts weights on \"disk\", so dispatch_model writes them "
                      "to an offload folder; set DispatchOptions().offload_folder(dir)");
  }
  remove_hooks(model);  // an earlier dispatch's weights resident (a dispatch leaves some empty)
  for (const auto& tensor : placed) {
    if (tensor.tensor.is_meta()) {
      throw ConfigError("acc: '" + tensor.name + "' is empty (built under acc::init_empty_weights); "
                        "dispatch_model places loaded weights: use acc::load_checkpoint_and_dispatch");
    }
  }
  if (!disk_index.empty()) {
    safetensors::NamedTensors to_disk;
    for (const auto i : disk_index) to_disk.emplace_back(placed[i].name, placed[i].tensor);
    const auto written = detail::write_disk_weights(to_disk, options.offload_folder(), "acc-offload");
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
  return dispatch_model(model, DeviceMap{{"", "cpu"}},
                        DispatchOptions().execution_device(execution_device));
}

DispatchReport disk_offload(torch::nn::Module& model, const std::string& folder,
                            c10::Device execution_device) {
  return dispatch_model(model, DeviceMap{{"", "disk"}},
                        DispatchOptions().offload_folder(folder).execution_device(execution_device));
}

}  // namespace acc
