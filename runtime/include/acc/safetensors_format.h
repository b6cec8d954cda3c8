#pragma once
// The safetensors file format without libtorch: bytes in, a validated header and offset table
// out (and the reverse for writing). Kept torch-free so that it can be fuzzed on its own.
//
// Layout: 8-byte little-endian header length N, N bytes of JSON
// {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}},
// then the data section; offsets are relative to the data section.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <acc/errors.h>

namespace acc::safetensors {

/// The element types of the format, with the names Python's safetensors writes.
enum class Dtype {
  BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64,
  F8_E4M3, F8_E4M3FNUZ, F8_E5M2, F8_E5M2FNUZ, C64
};

const char* dtype_name(Dtype dtype);
/// Bytes per element.
size_t dtype_size(Dtype dtype);
/// False when `name` is not one of the format's dtypes.
bool parse_dtype(const std::string& name, Dtype* out);

/// Headers larger than this are rejected before parsing (Python safetensors' limit).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
/// Files with more tensors than this are refused while the header is read (2^20: far above any
/// real checkpoint file, which shards hold to thousands; it bounds what one header may allocate).
constexpr size_t kMaxTensors = size_t{1} << 20;

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets into the data section
  uint64_t end = 0;
};

using Metadata = std::vector<std::pair<std::string, std::string>>;

struct Header {
  std::vector<TensorInfo> tensors;  // sorted by data offset
  Metadata metadata;                // the __metadata__ entries, sorted by key
  uint64_t data_start = 0;          // absolute file offset of the data section
};

/// Parses and validates the header of a safetensors file whose first `size` bytes (the whole
/// file) are `bytes`: length bounded, JSON well-formed with exactly the expected fields, dtypes
/// known, shapes non-negative without overflow, byte length = elements x element size, offsets
/// contiguous from 0 without gaps or overlaps and ending exactly at the end of the file, names
/// unique. Throws FormatError naming `source` and the problem.
Header parse_header(const uint8_t* bytes, size_t size, const std::string& source);

/// The bytes that precede the data section for `tensors` (each with name, dtype, shape; offsets
/// are assigned in the given order, contiguously): length prefix, JSON, space padding to a
/// multiple of 8 so that tensors stay aligned. Fills in begin/end of every tensor.
std::string serialize_header(std::vector<TensorInfo>& tensors, const Metadata& metadata);

/// A shard index (model.safetensors.index.json): weight name -> shard file name.
struct ShardIndex {
  uint64_t total_size = 0;
  std::vector<std::pair<std::string, std::string>> weight_map;  // sorted by weight name
};

/// Parses an index: an object with "weight_map" {str: str} and optional "metadata" (whose
/// "total_size" must be a non-negative integer when present). Shard names must be plain file
/// names (no '/', no "..") so an index cannot point outside its directory. Throws FormatError.
ShardIndex parse_index(const std::string& text, const std::string& source);
/// The index as Accelerate writes it (indent 2, keys sorted, trailing newline).
std::string serialize_index(const ShardIndex& index);

}  // namespace acc::safetensors
