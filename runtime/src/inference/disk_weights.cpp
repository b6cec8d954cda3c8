#include "inference/disk_weights.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "checkpoint/file_io.h"

namespace acc::detail {

DiskWeight disk_weight(const std::string& path, const safetensors::Header& header,
                       const std::string& name) {
  for (const auto& info : header.tensors) {
    if (info.name != name) continue;
    DiskWeight weight;
    weight.path = path;
    weight.offset = header.data_start + info.begin;
    weight.bytes = info.end - info.begin;
    weight.dtype = safetensors::to_torch(info.dtype);
    weight.shape = info.shape;
    return weight;
  }
  throw safetensors::FormatError("acc: '" + path + "' has no tensor named '" + name + "'");
}

at::Tensor map_weight(const DiskWeight& weight) {
  const auto options = at::TensorOptions().dtype(weight.dtype).device(at::kCPU);
  if (weight.bytes == 0) return at::empty(weight.shape, options);
  const int fd = ::open(weight.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_system_error("open the offloaded weights", weight.path);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = weight.offset / page * page;
  const size_t length = weight.offset + weight.bytes - start;
  if (weight.offset % at::elementSize(weight.dtype) != 0) {
    auto copy = at::empty(weight.shape, options);
    auto* out = static_cast<char*>(copy.data_ptr());
    for (uint64_t done = 0; done < weight.bytes;) {
      const ssize_t got = ::pread(fd, out + done, weight.bytes - done, weight.offset + done);
      if (got <= 0) {
        ::close(fd);
        throw_system_error("read the offloaded weights", weight.path);
      }
      done += static_cast<uint64_t>(got);
    }
    ::close(fd);
    return copy;
  }
  void* address = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, start);
  ::close(fd);
  if (address == MAP_FAILED) throw_system_error("mmap the offloaded weights", weight.path);
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
                                           const std::string& path) {
  const std::string temporary = path + ".tmp";
  safetensors::save_file(tensors, temporary);
  sync_path(temporary);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) throw_system_error("rename into", path);
  const auto header = safetensors::read_header(path);
  std::vector<DiskWeight> out;
  out.reserve(tensors.size());
  for (const auto& entry : tensors) out.push_back(disk_weight(path, header, entry.first));
  return out;
}

}  // namespace acc::detail
