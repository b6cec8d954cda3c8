#pragma once
// Testing hooks: code paths that run only on CUDA, forced onto CPU tensors so that tests check their
// logic on machines without a GPU. Not included by acc.h; programs never need them.
namespace acc::testing {

struct ForcedOnCpu {
  /// fp16 loss scaling (GradScaler) when mixed_precision is fp16, as on CUDA.
  bool grad_scaler = false;
  /// FSDP offload_params: master shards and gradient shards apart from the model, as on CUDA.
  bool fsdp_offload = false;
  /// Big-model dispatch: weights a device map keeps on "cpu" are copied in around their module's
  /// forward and dropped after, as when the execution device is a GPU.
  bool offload_copies = false;
};

/// What Accelerators constructed from now on in this process force onto the CPU.
void force_on_cpu(ForcedOnCpu paths);
ForcedOnCpu forced_on_cpu();

/// Forces `paths` for its lifetime, then restores what was forced before.
class ForceOnCpuGuard {
 public:
  explicit ForceOnCpuGuard(ForcedOnCpu paths) : previous_(forced_on_cpu()) { force_on_cpu(paths); }
  ~ForceOnCpuGuard() { force_on_cpu(previous_); }
  ForceOnCpuGuard(const ForceOnCpuGuard&) = delete;
  ForceOnCpuGuard& operator=(const ForceOnCpuGuard&) = delete;

 private:
  ForcedOnCpu previous_;
};

}  // namespace acc::testing
