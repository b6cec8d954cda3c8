// DeviceMap (Accelerate's hf_device_map), its JSON, and the memory limits device maps are computed
// against (Accelerate's get_max_memory and convert_file_size_to_int).
#include <acc/checkpoint_model.h>
#include <acc/device_map.h>
#include <acc/errors.h>
#include <acc/warnings.h>

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "inference/module_tree.h"

namespace acc {

namespace detail {

std::optional<std::string> normalise_device(const std::string& device) {
  if (device == "cpu" || device == "disk" || device == "meta") return device;
  if (device == "cuda") return std::string("cuda:0");
  std::string digits = device;
  if (device.rfind("cuda:", 0) == 0) digits = device.substr(5);
  if (digits.empty() || digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return std::nullopt;
  }
  return "cuda:" + std::to_string(std::stoi(digits));
}

int gpu_index(const std::string& device) {
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5) return -1;
  for (size_t i = 5; i < device.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(device[i]))) return -1;
  }
  return device.size() > 11 ? -1 : std::stoi(device.substr(5));
}

bool device_before(const std::string& a, const std::string& b) {
  auto rank = [](const std::string& d) -> std::pair<int, int> {
    const int gpu = gpu_index(d);
    if (gpu >= 0) return {0, gpu};
    if (d == "cpu") return {1, 0};
    if (d == "disk") return {2, 0};
    return {3, 0};
  };
  return rank(a) < rank(b);
}

}  // namespace detail

namespace {

bool valid_module_name(const std::string& name) {
  if (name.empty()) return true;  // the whole model
  if (name.front() == '.' || name.back() == '.') return false;
  return name.find("..") == std::string::npos;
}

const char* kDevices = "\"cuda:N\" (or a GPU index N), \"cpu\", \"disk\" or \"meta\"";

std::string device_of_entry(const std::string& module, const std::string& device, const std::string& where) {
  auto normal = detail::normalise_device(device);
  if (!normal) {
    throw ConfigError("acc: " + where + ": the entry '" + module + "' has the device '" + device + "'; use " +
                      kDevices);
  }
  return *normal;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// DeviceMap

DeviceMap::DeviceMap(std::initializer_list<Entry> entries) {
  for (const auto& [module, device] : entries) {
    auto same = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.first == module; });
    if (same != entries_.end()) throw ConfigError("acc: device map: the entry '" + module + "' is given twice");
    set(module, device);
  }
}

void DeviceMap::set(const std::string& module, const std::string& device) {
  if (!valid_module_name(module)) {
    throw ConfigError("acc: device map: the entry '" + module +
                      "' is not a module name (names are dot-separated, "
                      "\"\" is the whole model)");
  }
  const std::string normal = device_of_entry(module, device, "device map");
  for (auto& entry : entries_) {
    if (entry.first == module) {
      entry.second = normal;
      return;
    }
  }
  entries_.emplace_back(module, normal);
}

std::optional<size_t> DeviceMap::entry_of(const std::string& name) const {
  std::optional<size_t> best;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const auto& key = entries_[i].first;
    const bool covers = key.empty() || key == name ||
                        (name.size() > key.size() && name.compare(0, key.size(), key) == 0 && name[key.size()] == '.');
    if (covers && (!best || key.size() > entries_[*best].first.size())) best = i;
  }
  return best;
}

std::optional<std::string> DeviceMap::device_of(const std::string& name) const {
  const auto entry = entry_of(name);
  if (!entry) return std::nullopt;
  return entries_[*entry].second;
}

std::vector<std::string> DeviceMap::devices() const {
  std::vector<std::string> out;
  for (const auto& entry : entries_) {
    if (std::find(out.begin(), out.end(), entry.second) == out.end()) out.push_back(entry.second);
  }
  return out;
}

std::string DeviceMap::to_json() const {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  for (const auto& [module, device] : entries_) {
    const int gpu = detail::gpu_index(device);
    if (gpu >= 0) {
      json[module] = gpu;
    } else {
      json[module] = device;
    }
  }
  return json.dump();
}

namespace {

// Reads a device map's JSON event by event in one linear pass, in file order: an object of module
// name -> GPU index or device string. (A parse into nlohmann's ordered_json, whose objects look keys
// up linearly, with a per-key callback for repeated names, took quadratic time in the entries.)
class DeviceMapReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit DeviceMapReader(const std::string& source) : source_(source) {}

  bool null() override { return bad(nlohmann::json(nullptr).dump()); }
  bool boolean(bool value) override { return bad(nlohmann::json(value).dump()); }
  bool number_integer(number_integer_t value) override { return bad(std::to_string(value)); }
  bool number_float(number_float_t, const string_t& text) override { return bad(text); }
  bool binary(binary_t&) override { return bad("binary data"); }
  bool number_unsigned(number_unsigned_t value) override { return entry(std::to_string(value)); }  // a GPU index
  bool string(string_t& value) override { return entry(std::move(value)); }
  bool start_object(std::size_t) override { return depth_++ == 0 || bad("a JSON object"); }
  bool end_object() override { return --depth_, true; }
  bool start_array(std::size_t) override { return depth_++ == 0 ? not_an_object() : bad("a JSON array"); }
  bool end_array() override { return --depth_, true; }
  bool key(string_t& key) override {
    if (!seen_.insert(key).second) throw ConfigError("acc: " + source_ + ": the entry '" + key + "' is given twice");
    key_ = std::move(key);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) override {
    throw ConfigError("acc: " + source_ + " is not valid JSON (" + error.what() + ")");
  }

  std::vector<std::pair<std::string, std::string>> entries;

 private:
  bool entry(std::string device) {
    if (depth_ == 0) return not_an_object();
    entries.emplace_back(std::move(key_), std::move(device));
    return true;
  }
  bool bad(const std::string& value) {
    if (depth_ == 0) return not_an_object();
    throw ConfigError("acc: " + source_ + ": the entry '" + key_ + "' has the device " + value + "; use " + kDevices);
  }
  [[noreturn]] bool not_an_object() {
    throw ConfigError("acc: " + source_ +
                      " is not a JSON object of module names to devices, such as "
                      "{\"embed\": 0, \"layers.0\": \"cpu\"}");
  }

  const std::string& source_;
  int depth_ = 0;
  std::string key_;
  std::unordered_set<std::string> seen_;
};

}  // namespace

DeviceMap DeviceMap::from_json(const std::string& text, const std::string& source) {
  DeviceMapReader reader(source);
  nlohmann::json::sax_parse(text, &reader);
  DeviceMap map;
  map.entries_.reserve(reader.entries.size());
  for (auto& [module, device] : reader.entries) {
    if (!valid_module_name(module)) {
      throw ConfigError("acc: " + source + ": the entry '" + module + "' is not a module name");
    }
    map.entries_.emplace_back(module, device_of_entry(module, device, source));
  }
  return map;
}

std::ostream& operator<<(std::ostream& out, const DeviceMap& map) {
  for (const auto& [module, device] : map.entries()) {
    out << (module.empty() ? "\"\"" : module) << " -> " << device << "\n";
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Memory limits

namespace {

uint64_t parse_size(const std::string& device, const std::string& text) {
  // parse_shard_size refuses zero, which a limit may be ("no memory on this device").
  size_t start = text.find_first_not_of(" \t");
  size_t end = start;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  try {
    if (end > start && std::stod(text.substr(start, end - start)) == 0.0) {
      parse_shard_size("1" + text.substr(end));  // the unit must still be one
      return 0;
    }
    return parse_shard_size(text);
  } catch (const ConfigError&) {
    throw ConfigError("acc: max_memory: the limit '" + text + "' of '" + device +
                      "' is not a size; use a number of bytes or a number with KB, MB, GB, TB (powers of 1000) "
                      "or KiB, MiB, GiB, TiB (powers of 1024), e.g. \"10GiB\"");
  } catch (const std::exception&) {
    throw ConfigError("acc: max_memory: the limit '" + text + "' of '" + device + "' is not a size");
  }
}

std::string memory_device(const std::string& device) {
  auto normal = detail::normalise_device(device);
  if (!normal || *normal == "meta") {
    throw ConfigError("acc: max_memory: the device '" + device +
                      "' is not one of \"cuda:N\" (or a GPU index N), \"cpu\" and \"disk\"");
  }
  return *normal;
}

int visible_gpus() {
  if (!at::globalContext().hasCUDA()) return 0;
  return static_cast<int>(at::detail::getCUDAHooks().deviceCount());
}

uint64_t available_cpu_memory() {
  // psutil.virtual_memory().available on Linux: MemAvailable.
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      uint64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  }
  throw Error("acc: get_max_memory: /proc/meminfo has no MemAvailable; pass max_memory for \"cpu\"");
}

}  // namespace

MaxMemory parse_max_memory(const std::vector<std::pair<std::string, std::string>>& limits) {
  MaxMemory out;
  for (const auto& [device, text] : limits) {
    const std::string normal = memory_device(device);
    for (const auto& [seen, bytes] : out) {
      if (seen == normal) throw ConfigError("acc: max_memory: the device '" + normal + "' is given twice");
    }
    out.emplace_back(normal, parse_size(normal, text));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return detail::device_before(a.first, b.first); });
  return out;
}

MaxMemory get_max_memory(const MaxMemory& limits) {
  if (!limits.empty()) {
    MaxMemory out;
    for (const auto& [device, bytes] : limits) {
      const std::string normal = memory_device(device);
      for (const auto& [seen, ignored] : out) {
        if (seen == normal) throw ConfigError("acc: max_memory: the device '" + normal + "' is given twice");
      }
      out.emplace_back(normal, bytes);
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return detail::device_before(a.first, b.first); });
    // As Accelerate: a GPU that is not there is a warning, not an error (a map can be computed
    // for another machine).
    const int gpus = visible_gpus();
    for (const auto& [device, bytes] : out) {
      const int gpu = detail::gpu_index(device);
      if (gpu >= gpus) {
        detail::warn("acc: warning: max_memory names " + device + ", but this process sees " + std::to_string(gpus) +
                     " GPU(s)");
      }
    }
    return out;
  }

  MaxMemory out;
  const int gpus = visible_gpus();
  for (int i = 0; i < gpus; ++i) {
    try {
      // Initialise the device first, as Accelerate does, so that its context is counted.
      const c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(i));
      (void)at::empty({1}, at::TensorOptions().device(device));
      const auto info = c10::getDeviceAllocator(c10::DeviceType::CUDA)->getMemoryInfo(device.index());
      out.emplace_back("cuda:" + std::to_string(i), static_cast<uint64_t>(info.first));
    } catch (const std::exception&) {
      continue;  // Accelerate: "Device i seems unavailable"
    }
  }
  out.emplace_back("cpu", available_cpu_memory());
  return out;
}

}  // namespace acc
