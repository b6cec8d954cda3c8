#include "inference/disk_weights.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>

namespace acc::detail {

DiskWeight disk_weight(std::shared_ptr<const FileHandle> file, const safetensors::Header& header,
                       const std::string& name) {
  for (const auto& info : header.tensors) {
    if (info.name != name) continue;
    DiskWeight weight;
    weight.file = std::move(file);
    weight.offset = header.data_start + info.begin;
    weight.bytes = info.end - info.begin;
    weight.dtype = safetensors::to_torch(info.dtype);
    weight.shape = info.shape;
    return weight;
  }
  throw safetensors::FormatError("acc: '" + file->path() + "' has no tensor named '" + name + "'");
}

at::Tensor map_weight(const DiskWeight& weight) {
  const auto options = at::TensorOptions().dtype(weight.dtype).device(at::kCPU);
  if (weight.bytes == 0) return at::empty(weight.shape, options);
  if (weight.offset % at::elementSize(weight.dtype) != 0) {  // misaligned for its dtype: a copy
    auto copy = at::empty(weight.shape, options);
    read_exact_at(*weight.file, copy.data_ptr(), weight.bytes, weight.offset);
    return copy;
  }
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = weight.offset / page * page;
  const size_t length = weight.offset + weight.bytes - start;
  void* address = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, weight.file->fd(), start);
  if (address == MAP_FAILED) throw_system_error("mmap the offloaded weights", weight.file->path());
  char* data = static_cast<char*>(address) + (weight.offset - start);
  return at::from_blob(data, weight.shape, [address, length](void*) { ::munmap(address, length); },
                       options);
}

void read_ahead(const at::Tensor& tensor) {
  const auto bytes = static_cast<uintptr_t>(tensor.numel()) * tensor.element_size();
  if (bytes == 0) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(tensor.data_ptr()) / page * page;
  const auto end = reinterpret_cast<uintptr_t>(tensor.data_ptr()) + bytes;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);  // advice: failure is harmless
}

std::vector<DiskWeight> write_disk_weights(const safetensors::NamedTensors& tensors,
                                           const std::string& folder, const std::string& stem) {
  static std::atomic<int> counter{0};
  std::filesystem::create_directories(folder);
  const std::string path = (std::filesystem::path(folder) /
                            (stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
                             ".safetensors"))
                               .string();
  write_file_atomically(path, [&](const std::string& temporary) { safetensors::save_file(tensors, temporary); });
  const auto file = std::make_shared<const FileHandle>(open_file(path));
  const auto header = safetensors::read_header(path);
  std::vector<DiskWeight> out;
  out.reserve(tensors.size());
  for (const auto& entry : tensors) out.push_back(disk_weight(file, header, entry.first));
  return out;
}

}  // namespace acc::detail
