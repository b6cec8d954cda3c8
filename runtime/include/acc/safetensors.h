#pragma once
// safetensors for libtorch: writing named tensors, and reading them by memory map without copies.
// Files are interchangeable with Python's `safetensors` (same dtype names, "format": "pt").
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <acc/safetensors_format.h>

namespace acc::safetensors {

/// Named tensors in a fixed order (state-dict order).
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// The format's dtype for a torch dtype; FormatError naming `tensor_name` when the format has none
/// (complex128, quantized types).
Dtype from_torch(at::ScalarType type, const std::string& tensor_name);
at::ScalarType to_torch(Dtype dtype);

/// Writes `tensors` (any device, layout or strides: their values are written) to `path`. Tensors
/// are laid out widest element first so that every tensor is aligned in the file and in a map of
/// it. Overwrites `path`; durability (fsync) is the caller's (see checkpoint_directory.h).
void save_file(const NamedTensors& tensors, const std::string& path,
               const Metadata& metadata = {{"format", "pt"}});

namespace detail {
struct Mapping;
}

/// A safetensors file mapped into memory and validated (parse_header). Tensors returned by
/// tensor() are CPU tensors over the mapping itself (copy-on-write: writing to them never changes
/// the file) and keep the mapping alive after the MappedFile is gone.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  const std::string& path() const { return path_; }
  const Header& header() const { return header_; }
  const Metadata& metadata() const { return header_.metadata; }
  /// Names in file order (data offset).
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  /// FormatError naming the file when `name` is absent.
  at::Tensor tensor(const std::string& name) const;
  NamedTensors tensors() const;

 private:
  at::Tensor make_tensor(const TensorInfo& info) const;
  std::string path_;
  std::shared_ptr<detail::Mapping> mapping_;
  Header header_;
};

/// The validated header of the file at `path`, read without mapping the file (what big-model
/// loading needs for weights that stay on disk).
Header read_header(const std::string& path);

/// Every tensor of the file at `path`, mapped (see MappedFile).
NamedTensors load_file(const std::string& path);

}  // namespace acc::safetensors
