// The torch-free safetensors core: strict header validation and header/index serialization.
// Everything read here may come from an untrusted file, so every number is range-checked before
// it is used and every failure names the file.
#include <acc/safetensors_format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

namespace acc::safetensors {
namespace {

struct DtypeEntry {
  Dtype dtype;
  const char* name;
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {Dtype::BOOL, "BOOL", 1},       {Dtype::U8, "U8", 1},
    {Dtype::I8, "I8", 1},           {Dtype::U16, "U16", 2},
    {Dtype::I16, "I16", 2},         {Dtype::U32, "U32", 4},
    {Dtype::I32, "I32", 4},         {Dtype::U64, "U64", 8},
    {Dtype::I64, "I64", 8},         {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},       {Dtype::F32, "F32", 4},
    {Dtype::F64, "F64", 8},         {Dtype::F8_E4M3, "F8_E4M3", 1},
    {Dtype::F8_E4M3FNUZ, "F8_E4M3FNUZ", 1}, {Dtype::F8_E5M2, "F8_E5M2", 1},
    {Dtype::F8_E5M2FNUZ, "F8_E5M2FNUZ", 1}, {Dtype::C64, "C64", 8},
};

const DtypeEntry& entry_of(Dtype dtype) {
  for (const auto& entry : kDtypes) {
    if (entry.dtype == dtype) return entry;
  }
  throw FormatError("acc: unknown safetensors dtype enumerator");
}

[[noreturn]] void fail(const std::string& source, const std::string& problem) {
  throw FormatError("acc: '" + source + "' is not a valid safetensors file: " + problem);
}

uint64_t read_le64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

void write_le64(uint64_t value, char* out) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

// Parses JSON, rejecting duplicate keys of the top-level object (nlohmann keeps the last one
// silently, which would let two readers of one file disagree).
nlohmann::json parse_json_unique_keys(const char* begin, const char* end, const std::string& source,
                                      const char* what) {
  std::set<std::string> seen;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) fail(source, std::string(what) + " repeats the key '" + key + "'");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(begin, end, callback);
  } catch (const nlohmann::json::exception& error) {
    fail(source, std::string(what) + " is not valid JSON (" + error.what() + ")");
  }
}

TensorInfo parse_tensor_entry(const std::string& name, const nlohmann::json& value,
                              const std::string& source) {
  const std::string where = "tensor '" + name + "'";
  if (!value.is_object()) fail(source, where + " is not a JSON object");
  for (const auto& item : value.items()) {
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets") {
      fail(source, where + " has an unexpected field '" + item.key() + "'");
    }
  }
  TensorInfo info;
  info.name = name;
  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) fail(source, where + " has no string 'dtype'");
  if (!parse_dtype(dtype->get_ref<const std::string&>(), &info.dtype)) {
    fail(source, where + " has the unknown dtype '" + dtype->get_ref<const std::string&>() + "'");
  }
  auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) fail(source, where + " has no array 'shape'");
  uint64_t elements = 1;
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned()) fail(source, where + " has a shape entry that is not a non-negative integer");
    const uint64_t size = dim.get<uint64_t>();
    if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(source, where + " has a dimension too large");
    }
    if (size != 0 && elements > std::numeric_limits<uint64_t>::max() / size) {
      fail(source, where + " has a shape whose element count overflows");
    }
    elements *= size;
    info.shape.push_back(static_cast<int64_t>(size));
  }
  auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    fail(source, where + " needs 'data_offsets' as two non-negative integers [begin, end]");
  }
  info.begin = (*offsets)[0].get<uint64_t>();
  info.end = (*offsets)[1].get<uint64_t>();
  if (info.end < info.begin) fail(source, where + " has data_offsets with end before begin");
  const size_t element_size = dtype_size(info.dtype);
  if (elements > std::numeric_limits<uint64_t>::max() / element_size) {
    fail(source, where + " has a byte size that overflows");
  }
  if (info.end - info.begin != elements * element_size) {
    fail(source, where + " spans " + std::to_string(info.end - info.begin) + " bytes but its shape and dtype need " +
                     std::to_string(elements * element_size));
  }
  return info;
}

void check_shard_file_name(const std::string& file, const std::string& source) {
  if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
      file.find('\\') != std::string::npos || file.find('\0') != std::string::npos) {
    throw FormatError("acc: index '" + source + "' names the shard '" + file +
                      "', which is not a plain file name in the index's directory");
  }
}

}  // namespace

const char* dtype_name(Dtype dtype) { return entry_of(dtype).name; }
size_t dtype_size(Dtype dtype) { return entry_of(dtype).size; }

bool parse_dtype(const std::string& name, Dtype* out) {
  for (const auto& entry : kDtypes) {
    if (name == entry.name) {
      *out = entry.dtype;
      return true;
    }
  }
  return false;
}

Header parse_header(const uint8_t* bytes, size_t size, const std::string& source) {
  if (size < 8) fail(source, "it is " + std::to_string(size) + " bytes long, shorter than the 8-byte header length");
  const uint64_t header_length = read_le64(bytes);
  if (header_length > kMaxHeaderBytes) {
    fail(source, "its header length " + std::to_string(header_length) + " exceeds the limit of " +
                     std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (header_length > size - 8) {
    fail(source, "its header length " + std::to_string(header_length) + " runs past the end of the file (" +
                     std::to_string(size) + " bytes)");
  }
  const char* json_begin = reinterpret_cast<const char*>(bytes + 8);
  const nlohmann::json json = parse_json_unique_keys(json_begin, json_begin + header_length, source, "the header");
  if (!json.is_object()) fail(source, "the header is not a JSON object");

  Header header;
  header.data_start = 8 + header_length;
  for (const auto& item : json.items()) {
    if (item.key() == "__metadata__") {
      if (!item.value().is_object()) fail(source, "'__metadata__' is not a JSON object");
      for (const auto& entry : item.value().items()) {
        if (!entry.value().is_string()) {
          fail(source, "'__metadata__' entry '" + entry.key() + "' is not a string");
        }
        header.metadata.emplace_back(entry.key(), entry.value().get<std::string>());
      }
      continue;
    }
    header.tensors.push_back(parse_tensor_entry(item.key(), item.value(), source));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t expected_begin = 0;
  for (const auto& tensor : header.tensors) {
    if (tensor.begin != expected_begin) {
      fail(source, "tensor '" + tensor.name + "' starts at data offset " + std::to_string(tensor.begin) +
                       " but the previous tensor ends at " + std::to_string(expected_begin) +
                       " (tensors must be contiguous and must not overlap)");
    }
    expected_begin = tensor.end;
  }
  const uint64_t data_size = size - header.data_start;
  if (expected_begin != data_size) {
    fail(source, "the tensors cover " + std::to_string(expected_begin) + " bytes but the data section is " +
                     std::to_string(data_size) + " bytes (truncated or trailing data)");
  }
  return header;
}

std::string serialize_header(std::vector<TensorInfo>& tensors, const Metadata& metadata) {
  nlohmann::ordered_json json = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& meta = json["__metadata__"];
    meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
  }
  uint64_t offset = 0;
  for (auto& tensor : tensors) {
    if (tensor.name == "__metadata__") {
      throw FormatError("acc: a tensor cannot be named '__metadata__' in a safetensors file; rename it");
    }
    if (json.contains(tensor.name)) {
      throw FormatError("acc: two tensors are named '" + tensor.name + "'; safetensors names must be unique");
    }
    uint64_t elements = 1;
    for (int64_t dim : tensor.shape) elements *= static_cast<uint64_t>(dim);
    tensor.begin = offset;
    tensor.end = offset + elements * dtype_size(tensor.dtype);
    offset = tensor.end;
    json[tensor.name] = {{"dtype", dtype_name(tensor.dtype)},
                         {"shape", tensor.shape},
                         {"data_offsets", {tensor.begin, tensor.end}}};
  }
  std::string text = json.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  write_le64(text.size(), out.data());
  return out + text;
}

ShardIndex parse_index(const std::string& text, const std::string& source) {
  auto fail_index = [&](const std::string& problem) -> void {
    throw FormatError("acc: '" + source + "' is not a valid shard index: " + problem);
  };
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail_index(std::string("not valid JSON (") + error.what() + ")");
  }
  if (!json.is_object()) fail_index("not a JSON object");
  ShardIndex index;
  auto metadata = json.find("metadata");
  if (metadata != json.end()) {
    if (!metadata->is_object()) fail_index("'metadata' is not an object");
    auto total = metadata->find("total_size");
    if (total != metadata->end()) {
      if (!total->is_number_unsigned()) fail_index("'metadata.total_size' is not a non-negative integer");
      index.total_size = total->get<uint64_t>();
    }
  }
  auto weight_map = json.find("weight_map");
  if (weight_map == json.end() || !weight_map->is_object()) fail_index("it has no 'weight_map' object");
  for (const auto& item : weight_map->items()) {
    if (!item.value().is_string()) fail_index("weight_map entry '" + item.key() + "' is not a string");
    const auto& file = item.value().get_ref<const std::string&>();
    check_shard_file_name(file, source);
    index.weight_map.emplace_back(item.key(), file);
  }
  return index;
}

std::string serialize_index(const ShardIndex& index) {
  nlohmann::json json;  // std::map-backed: keys sorted, as json.dumps(sort_keys=True)
  json["metadata"]["total_size"] = index.total_size;
  json["weight_map"] = nlohmann::json::object();
  for (const auto& [name, file] : index.weight_map) json["weight_map"][name] = file;
  return json.dump(2) + "\n";
}

}  // namespace acc::safetensors
