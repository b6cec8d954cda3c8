#include <acc/testing.h>

#include <atomic>

namespace acc::testing {
namespace {
std::atomic<bool> grad_scaler{false};
std::atomic<bool> fsdp_offload{false};
std::atomic<bool> offload_copies{false};
}  // namespace

void force_on_cpu(ForcedOnCpu paths) {
  grad_scaler = paths.grad_scaler;
  fsdp_offload = paths.fsdp_offload;
  offload_copies = paths.offload_copies;
}

ForcedOnCpu forced_on_cpu() { return ForcedOnCpu{grad_scaler.load(), fsdp_offload.load(), offload_copies.load()}; }

}  // namespace acc::testing
