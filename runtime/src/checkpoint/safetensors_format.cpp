// The torch-free safetensors core: strict header validation and header/index serialization.
// Everything read here may come from an untrusted file, so every number is range-checked before
// it is used and every failure names the file.
#include <acc/safetensors_format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>

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

// Reads the header's JSON event by event straight into a Header, in one linear pass: no JSON tree.
// Names must not repeat (nlohmann keeps the last of two equal keys silently, which would let two
// readers of one file disagree; its per-key parse callback made that check quadratic): each name's
// hash is kept, and after the pass the sorted hashes are compared, names only where hashes meet (a
// hash set of a million names costs more than the whole parse, in cache misses). The events a header can hold, by depth: 1 the outer object's members, 2 the
// fields of a tensor or the __metadata__ entries, 3 the numbers of a shape or data_offsets.
class HeaderReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  HeaderReader(const std::string& source, Header& header) : source_(source), header_(header) {}

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }  // only negative ones come here
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool number_unsigned(number_unsigned_t value) override {
    if (depth_ == 3 && field_ == Field::shape) return dimension(value);
    if (depth_ == 3 && field_ == Field::data_offsets) return offset(value);
    return scalar();
  }
  bool string(string_t& value) override {
    if (depth_ == 2 && in_metadata_) {
      header_.metadata.emplace_back(std::move(key_), std::move(value));
      return true;
    }
    if (depth_ == 2 && field_ == Field::dtype) {
      if (!parse_dtype(value, &tensor_.dtype)) fail(source_, where() + " has the unknown dtype '" + value + "'");
      return true;
    }
    return scalar();
  }
  bool start_object(std::size_t) override {
    if (depth_ == 0 || (depth_ == 1 && key_ == "__metadata__")) {
      in_metadata_ = depth_ == 1;
    } else if (depth_ == 1) {
      tensor_ = TensorInfo();
      tensor_.name = std::move(key_);
      seen_ = 0;
    } else {
      scalar();
    }
    ++depth_;
    return true;
  }
  bool key(string_t& key) override {
    if (depth_ == 1) {
      if (key == "__metadata__") {
        if (has_metadata_) fail(source_, "the header repeats the key '__metadata__'");
        has_metadata_ = true;
      } else if (header_.tensors.size() == kMaxTensors) {
        fail(source_, "it names more than " + std::to_string(kMaxTensors) + " tensors, the most acc reads from one file");
      }
    } else if (!in_metadata_) {
      field_ = field_named(key);
      const unsigned bit = 1u << static_cast<unsigned>(field_);
      if (seen_ & bit) fail(source_, where() + " repeats the field '" + key + "'");
      seen_ |= bit;
    }
    key_ = std::move(key);
    return true;
  }
  bool end_object() override {
    --depth_;
    if (depth_ == 1 && in_metadata_) {
      in_metadata_ = false;
    } else if (depth_ == 1) {
      finish_tensor();
    }
    field_ = Field::none;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ != 2 || in_metadata_ || (field_ != Field::shape && field_ != Field::data_offsets)) scalar();
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    if (field_ == Field::data_offsets && offsets_ != 2) fail(source_, offsets_problem());
    field_ = Field::none;
    return true;
  }
  // nlohmann's message quotes what it last read: the position only.
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) override {
    fail(source_, "the header is not valid JSON (a syntax error at byte " + std::to_string(position) +
                      " of the header)");
  }

  /// After the pass: no tensor name twice.
  void check_names_unique() {
    std::sort(name_hashes_.begin(), name_hashes_.end());
    for (size_t i = 1; i < name_hashes_.size(); ++i) {
      for (size_t j = i; j-- > 0 && name_hashes_[j].first == name_hashes_[i].first;) {
        const std::string& name = header_.tensors[name_hashes_[i].second].name;
        if (header_.tensors[name_hashes_[j].second].name == name) fail(source_, "the header repeats the key '" + name + "'");
      }
    }
  }

 private:
  // Each field once; the bits of `seen_` are these values.
  enum class Field : unsigned { dtype, shape, data_offsets, none };

  Field field_named(const std::string& key) const {
    if (key == "dtype") return Field::dtype;
    if (key == "shape") return Field::shape;
    if (key == "data_offsets") return Field::data_offsets;
    fail(source_, where() + " has an unexpected field '" + key + "'");
  }

  std::string where() const { return "tensor '" + tensor_.name + "'"; }
  std::string offsets_problem() const {
    return where() + " needs 'data_offsets' as two non-negative integers [begin, end]";
  }

  // A value where the format has none of its kind: the message says what belongs there.
  bool scalar() {
    if (depth_ == 0) fail(source_, "the header is not a JSON object");
    if (depth_ == 1 && key_ == "__metadata__") fail(source_, "'__metadata__' is not a JSON object");
    if (depth_ == 1) fail(source_, "tensor '" + key_ + "' is not a JSON object");
    if (in_metadata_) fail(source_, "'__metadata__' entry '" + key_ + "' is not a string");
    if (field_ == Field::dtype) fail(source_, where() + " has no string 'dtype'");
    if (field_ == Field::shape && depth_ == 2) fail(source_, where() + " has no array 'shape'");
    if (field_ == Field::shape) fail(source_, where() + " has a shape entry that is not a non-negative integer");
    fail(source_, offsets_problem());
  }

  bool dimension(uint64_t size) {
    if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(source_, where() + " has a dimension too large");
    }
    if (size != 0 && elements_ > std::numeric_limits<uint64_t>::max() / size) {
      fail(source_, where() + " has a shape whose element count overflows");
    }
    elements_ *= size;
    tensor_.shape.push_back(static_cast<int64_t>(size));
    return true;
  }

  bool offset(uint64_t value) {
    if (offsets_ == 2) fail(source_, offsets_problem());
    (offsets_++ == 0 ? tensor_.begin : tensor_.end) = value;
    return true;
  }

  void finish_tensor() {
    if (!(seen_ & 1u << static_cast<unsigned>(Field::dtype))) fail(source_, where() + " has no string 'dtype'");
    if (!(seen_ & 1u << static_cast<unsigned>(Field::shape))) fail(source_, where() + " has no array 'shape'");
    if (!(seen_ & 1u << static_cast<unsigned>(Field::data_offsets))) fail(source_, offsets_problem());
    if (tensor_.end < tensor_.begin) fail(source_, where() + " has data_offsets with end before begin");
    const uint64_t elements = elements_;
    const size_t element_size = dtype_size(tensor_.dtype);
    if (elements > std::numeric_limits<uint64_t>::max() / element_size) {
      fail(source_, where() + " has a byte size that overflows");
    }
    if (tensor_.end - tensor_.begin != elements * element_size) {
      fail(source_, where() + " spans " + std::to_string(tensor_.end - tensor_.begin) +
                        " bytes but its shape and dtype need " + std::to_string(elements * element_size));
    }
    name_hashes_.emplace_back(std::hash<std::string>()(tensor_.name), header_.tensors.size());
    header_.tensors.push_back(std::move(tensor_));
    offsets_ = 0;
    elements_ = 1;
  }

  const std::string& source_;
  Header& header_;
  int depth_ = 0;
  bool in_metadata_ = false;
  std::string key_;  // the member being read at depth 1, or the metadata entry at depth 2
  bool has_metadata_ = false;
  std::vector<std::pair<size_t, size_t>> name_hashes_;  // (hash of the name, index in header_.tensors)
  TensorInfo tensor_;
  Field field_ = Field::none;
  unsigned seen_ = 0;
  int offsets_ = 0;
  uint64_t elements_ = 1;
};

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
  // The length is the file's own bytes: said to be too large, never quoted (a file that is not
  // safetensors at all, e.g. text reached by mistake, would have its first 8 bytes printed).
  if (header_length > kMaxHeaderBytes) {
    fail(source, "its first 8 bytes, read as the header length, exceed the limit of " +
                     std::to_string(kMaxHeaderBytes) + " bytes (it is not a safetensors file, or it is damaged)");
  }
  if (header_length > size - 8) {
    fail(source, "its first 8 bytes, read as the header length, run past the end of the file (" +
                     std::to_string(size) + " bytes; cut short, or not a safetensors file)");
  }
  const char* json_begin = reinterpret_cast<const char*>(bytes + 8);
  Header header;
  header.data_start = 8 + header_length;
  HeaderReader reader(source, header);
  nlohmann::json::sax_parse(json_begin, json_begin + header_length, &reader);
  reader.check_names_unique();
  std::sort(header.metadata.begin(), header.metadata.end());
  const auto repeated = std::adjacent_find(header.metadata.begin(), header.metadata.end(),
                                           [](const auto& a, const auto& b) { return a.first == b.first; });
  if (repeated != header.metadata.end()) fail(source, "'__metadata__' repeats the key '" + repeated->first + "'");
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
  } catch (const nlohmann::json::parse_error& error) {
    // nlohmann's message quotes what it last read: the position only.
    fail_index("not valid JSON (a syntax error at byte " + std::to_string(error.byte) + ")");
  } catch (const nlohmann::json::exception&) {
    fail_index("not valid JSON");
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
