#pragma once
// What no_sync() and accumulate() switch on a prepared model: the DDP reducer and the sharded
// (FSDP) reducer both skip communication while sync is not required.
namespace acc::detail {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  /// False inside no_sync(): gradients accumulate locally and nothing is communicated.
  virtual void set_require_sync(bool value) = 0;
  virtual bool require_sync() const = 0;
};

}  // namespace acc::detail
