// acc's side of the device-map parity with Accelerate (device_map_parity.py): each argument is one
// scenario as JSON, {"model": "transformer" | "mlp" | "nested", "config": {...}, "mode": ...,
// "max_memory": {"0": bytes or "10GiB", "cpu": ...}, "no_split": [...], "dtype": "bfloat16",
// "clean_result": bool, "offload_buffers": bool}; for each, one line of JSON:
//   mode "infer" (default): infer_auto_device_map(...).to_json()
//   mode "auto", "balanced", "balanced_low_0", "sequential": resolve_device_map(...).to_json()
//   mode "balanced_memory", "balanced_memory_low_0": get_balanced_memory(...) as {device: bytes}
//   mode "sizes": compute_module_sizes(model, dtype) as {name: bytes}, in order
//   mode "tied": find_tied_parameters(model)
//   mode "max_memory": get_max_memory(parse_max_memory(max_memory)) as {device: bytes}
// An error prints {"error": "..."} and the program goes on with the next scenario.
#include <c10/core/ScalarType.h>

#include <iostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include <acc/device_map.h>

#include "models.h"

namespace {

using nlohmann::ordered_json;

std::optional<c10::ScalarType> dtype_of(const ordered_json& spec) {
  if (!spec.contains("dtype") || spec["dtype"].is_null()) return std::nullopt;
  const auto name = spec["dtype"].get<std::string>();
  if (name == "float32") return c10::ScalarType::Float;
  if (name == "float16") return c10::ScalarType::Half;
  if (name == "bfloat16") return c10::ScalarType::BFloat16;
  if (name == "float8_e4m3fn") return c10::ScalarType::Float8_e4m3fn;
  throw std::invalid_argument("unknown dtype " + name);
}

// Devices as Accelerate writes them: GPU indices as integers.
ordered_json memory_json(const acc::MaxMemory& memory) {
  ordered_json out = ordered_json::object();
  for (const auto& [device, bytes] : memory) {
    out[device.rfind("cuda:", 0) == 0 ? device.substr(5) : device] = bytes;
  }
  return out;
}

std::string run(const ordered_json& spec) {
  acc::testing::ModelConfig config;
  if (spec.contains("config")) {
    const auto& c = spec["config"];
    config.layers = c.value("layers", config.layers);
    config.dim = c.value("dim", config.dim);
    config.hidden = c.value("hidden", config.hidden);
    config.vocab = c.value("vocab", config.vocab);
    config.context = c.value("context", config.context);
  }
  const auto model = acc::testing::make_model(spec.value("model", "transformer"), config);

  std::vector<std::pair<std::string, std::string>> limits;
  if (spec.contains("max_memory")) {
    for (const auto& item : spec["max_memory"].items()) {
      limits.emplace_back(item.key(), item.value().is_string() ? item.value().get<std::string>() : item.value().dump());
    }
  }
  acc::AutoDeviceMapOptions options;
  options.max_memory(acc::parse_max_memory(limits))
      .no_split_module_classes(spec.value("no_split", std::vector<std::string>{}))
      .dtype(dtype_of(spec))
      .clean_result(spec.value("clean_result", true))
      .offload_buffers(spec.value("offload_buffers", false))
      .verbose(spec.value("verbose", false));

  const std::string mode = spec.value("mode", "infer");
  if (mode == "infer") return acc::infer_auto_device_map(*model, options).to_json();
  if (mode == "auto" || mode == "balanced" || mode == "balanced_low_0" || mode == "sequential") {
    return acc::resolve_device_map(*model, mode, options).to_json();
  }
  if (mode == "balanced_memory" || mode == "balanced_memory_low_0") {
    return memory_json(acc::get_balanced_memory(*model, options, mode == "balanced_memory_low_0")).dump();
  }
  if (mode == "max_memory") return memory_json(acc::get_max_memory(options.max_memory())).dump();
  if (mode == "sizes") {
    ordered_json out = ordered_json::object();
    for (const auto& [name, bytes] : acc::compute_module_sizes(*model, options.dtype())) out[name] = bytes;
    return out.dump();
  }
  if (mode == "tied") return ordered_json(acc::find_tied_parameters(*model)).dump();
  throw std::invalid_argument("unknown mode " + mode);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    try {
      std::cout << run(ordered_json::parse(argv[i])) << std::endl;
    } catch (const std::exception& error) {
      std::cout << ordered_json{{"error", error.what()}}.dump() << std::endl;
    }
  }
  return 0;
}
