#include "fsdp/unit_memory.h"

#include <ATen/ops/empty.h>
#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace acc::detail {

namespace {

struct Mapping {
  void* address;
  size_t bytes;
};

void unmap(void* context) {
  auto* mapping = static_cast<Mapping*>(context);
  ::munmap(mapping->address, mapping->bytes);
  delete mapping;
}

class UnitAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    if (bytes == 0) return {nullptr, c10::Device(c10::kCPU)};
    // Populated at once: a gather writes every byte, and the kernel fills the pages faster in one
    // call than one fault at a time.
    void* address = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (address == MAP_FAILED) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "acc: FSDP could not map ", bytes, " bytes for a unit's parameters: ",
                       std::strerror(errno));
    }
    return {address, new Mapping{address, bytes}, &unmap, c10::Device(c10::kCPU)};
  }
  void copy_data(void* destination, const void* source, std::size_t count) const override {
    default_copy_data(destination, source, count);
  }
};

UnitAllocator& unit_allocator() {
  static UnitAllocator allocator;
  return allocator;
}

}  // namespace

at::Tensor empty_unit(int64_t numel, const at::TensorOptions& options) {
  if (!options.device().is_cpu() || options.pinned_memory()) return at::empty({numel}, options);
  const auto bytes = static_cast<size_t>(numel) * options.dtype().itemsize();
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, &unit_allocator(), /*resizable=*/false);
  return at::empty({0}, options).set_(storage, 0, {numel}, {1});
}

}  // namespace acc::detail
