#pragma once
// An RAII guard for libtorch's thread-local autocast state (C++ has no `torch.autocast` context
// manager): sets enabled/dtype for one device type, restores them on exit, and clears the cast
// cache when the outermost autocast region ends, as torch.autocast.__exit__ does.
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace acc {

class AutocastGuard {
 public:
  /// `enabled = false` turns autocast off inside the guard (for code that must run in fp32).
  AutocastGuard(c10::DeviceType device_type, c10::ScalarType dtype, bool enabled);
  ~AutocastGuard();
  AutocastGuard(AutocastGuard&& other) noexcept;
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;
  AutocastGuard& operator=(AutocastGuard&&) = delete;

 private:
  c10::DeviceType device_type_;
  bool active_ = true;  // false once moved from
  bool previous_enabled_;
  c10::ScalarType previous_dtype_;
  bool previous_cache_enabled_;
};

}  // namespace acc
