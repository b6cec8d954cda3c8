// The libtorch side of safetensors: dtype mapping, writing tensor bytes, mapping files.
#include <acc/safetensors.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/TensorOptions.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "checkpoint/checksums.h"
#include "checkpoint/file_io.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "acc's safetensors code writes host memory as is; the format is little-endian");

namespace acc::safetensors {

namespace {
struct TorchPair {
  at::ScalarType torch;
  Dtype format;
};
constexpr TorchPair kPairs[] = {
    {at::kBool, Dtype::BOOL},
    {at::kByte, Dtype::U8},
    {at::kChar, Dtype::I8},
    {at::kUInt16, Dtype::U16},
    {at::kShort, Dtype::I16},
    {at::kUInt32, Dtype::U32},
    {at::kInt, Dtype::I32},
    {at::kUInt64, Dtype::U64},
    {at::kLong, Dtype::I64},
    {at::kHalf, Dtype::F16},
    {at::kBFloat16, Dtype::BF16},
    {at::kFloat, Dtype::F32},
    {at::kDouble, Dtype::F64},
    {at::kFloat8_e4m3fn, Dtype::F8_E4M3},
    {at::kFloat8_e4m3fnuz, Dtype::F8_E4M3FNUZ},
    {at::kFloat8_e5m2, Dtype::F8_E5M2},
    {at::kFloat8_e5m2fnuz, Dtype::F8_E5M2FNUZ},
    {at::kComplexFloat, Dtype::C64},
};
}  // namespace

Dtype from_torch(at::ScalarType type, const std::string& tensor_name) {
  for (const auto& pair : kPairs) {
    if (pair.torch == type) return pair.format;
  }
  throw FormatError("acc: tensor '" + tensor_name + "' has dtype " + std::string(c10::toString(type)) +
                    ", which safetensors cannot store; convert it (e.g. .to(torch::kFloat)) first");
}

at::ScalarType to_torch(Dtype dtype) {
  for (const auto& pair : kPairs) {
    if (pair.format == dtype) return pair.torch;
  }
  throw FormatError(std::string("acc: safetensors dtype ") + dtype_name(dtype) + " has no torch dtype");
}

void save_file(const NamedTensors& tensors, const std::string& path, const Metadata& metadata) {
  // Widest elements first: with the header padded to 8 bytes every tensor starts aligned.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return tensors[a].second.element_size() > tensors[b].second.element_size();
  });
  std::vector<TensorInfo> infos;
  std::vector<at::Tensor> data;
  infos.reserve(tensors.size());
  data.reserve(tensors.size());
  for (size_t i : order) {
    const auto& [name, tensor] = tensors[i];
    if (!tensor.defined()) throw FormatError("acc: tensor '" + name + "' is undefined and cannot be saved");
    TensorInfo info;
    info.name = name;
    info.dtype = from_torch(tensor.scalar_type(), name);
    info.shape = tensor.sizes().vec();
    infos.push_back(std::move(info));
    // Contiguous CPU tensors are written from their own memory; others are copied once.
    data.push_back(tensor.device().is_cpu() ? tensor.contiguous() : tensor.to(at::kCPU).contiguous());
  }
  const std::string header = serialize_header(infos, metadata);
  auto file = acc::detail::create_file(path);
  file.write_all(header.data(), header.size());
  for (const auto& tensor : data) {
    file.write_all(tensor.data_ptr(), tensor.nbytes());
  }
  file.close();
}

namespace detail {
struct Mapping {
  void* address = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (address != nullptr && size > 0) ::munmap(address, size);
  }
};
}  // namespace detail

MappedFile::MappedFile(const std::string& path) : path_(path), mapping_(std::make_shared<detail::Mapping>()) {
  const auto file = acc::detail::open_file(path);  // a regular file (a FIFO would block, a directory not map)
  const size_t size = static_cast<size_t>(acc::detail::file_size(file));
  if (size > 0) {
    // Private and writable: pages are shared with the page cache until a tensor is written to,
    // and writes never reach the file.
    void* address = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd(), 0);
    if (address == MAP_FAILED) acc::detail::throw_system_error("mmap", path);
    mapping_->address = address;
    mapping_->size = size;
  }
  acc::detail::verify_checkpoint_file(path, mapping_->address, size);
  header_ = parse_header(static_cast<const uint8_t*>(mapping_->address), size, path);
}

std::vector<std::string> MappedFile::names() const {
  std::vector<std::string> names;
  for (const auto& info : header_.tensors) names.push_back(info.name);
  return names;
}

bool MappedFile::contains(const std::string& name) const {
  return std::any_of(header_.tensors.begin(), header_.tensors.end(),
                     [&](const TensorInfo& info) { return info.name == name; });
}

at::Tensor MappedFile::tensor(const std::string& name) const {
  for (const auto& info : header_.tensors) {
    if (info.name == name) return make_tensor(info);
  }
  throw FormatError("acc: '" + path_ + "' has no tensor named '" + name + "'");
}

NamedTensors MappedFile::tensors() const {
  NamedTensors out;
  out.reserve(header_.tensors.size());
  for (const auto& info : header_.tensors) out.emplace_back(info.name, make_tensor(info));
  return out;
}

at::Tensor MappedFile::make_tensor(const TensorInfo& info) const {
  const auto options = at::TensorOptions().dtype(to_torch(info.dtype)).device(at::kCPU);
  char* data = static_cast<char*>(mapping_->address) + header_.data_start + info.begin;
  const size_t bytes = info.end - info.begin;
  if (bytes == 0) return at::empty(info.shape, options);
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(info.dtype) != 0) {
    // Files from other writers may leave a tensor misaligned; kernels expect aligned elements.
    auto copy = at::empty(info.shape, options);
    std::memcpy(copy.data_ptr(), data, bytes);
    return copy;
  }
  auto mapping = mapping_;
  return at::from_blob(data, info.shape, [mapping](void*) {}, options);
}

Header read_header(const std::string& path) {
  const auto file = acc::detail::open_file(path);
  const uint64_t size = acc::detail::file_size(file);
  std::string bytes(std::min<uint64_t>(size, 8), '\0');
  acc::detail::read_exact_at(file, bytes.data(), bytes.size(), 0);
  if (size >= 8) {
    uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    if (length <= kMaxHeaderBytes && length <= size - 8) {  // else parse_header names the problem
      bytes.resize(8 + length);
      acc::detail::read_exact_at(file, bytes.data() + 8, length, 8);
    }
  }
  // parse_header reads the length and the JSON only, and checks them against the file's size.
  return parse_header(reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<size_t>(size), path);
}

NamedTensors load_file(const std::string& path) { return MappedFile(path).tensors(); }

}  // namespace acc::safetensors
