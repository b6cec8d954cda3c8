#pragma once
// Options of acc::Accelerator, in the style of libtorch's TORCH_ARG options. Unset optional
// fields fall back to the environment (ACCELERATE_* variables set by acc-launch or
// `accelerate launch`), then to Accelerate's defaults: argument > environment > default.
#include <torch/arg.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <acc/detail/bucket_size.h>
#include <acc/fsdp.h>
#include <acc/launch_info.h>
#include <acc/tracker.h>
#include <acc/project_configuration.h>

namespace acc {

enum class MixedPrecision { NO, FP16, BF16 };
enum class DistributedType { NO, MULTI_CPU, MULTI_GPU, FSDP };

std::string to_string(MixedPrecision value);
std::string to_string(DistributedType value);
/// Parses "no" | "fp16" | "bf16" (case-insensitive); `source` names where the text came from.
MixedPrecision parse_mixed_precision(const std::string& text, const std::string& source);

/// torch DistributedDataParallel's options (Accelerate's DistributedDataParallelKwargs).
struct DistributedDataParallelKwargs {
  /// Broadcast rank 0's buffers (BatchNorm statistics) after every synchronising backward, so
  /// that the next forward sees rank 0's buffers, as torch DDP does before each forward.
  TORCH_ARG(bool, broadcast_buffers) = true;
  /// Gradient bucket size in MiB.
  TORCH_ARG(double, bucket_cap_mb) = detail::kDefaultBucketCapMb;
  /// Size of the first bucket of each dtype and device (the last layers, whose gradients are ready
  /// first) in MiB, small so that communication starts early in backward: torch DDP's private
  /// 1 MiB constant, here an option. Setting it to bucket_cap_mb gives a model that fits one bucket
  /// a single all-reduce per step.
  TORCH_ARG(double, first_bucket_cap_mb) = 1.0;
  /// Allow parameters that receive no gradient in a backward pass (they are reduced as zeros and
  /// left without a gradient when no rank used them). Off: such a parameter is an error.
  TORCH_ARG(bool, find_unused_parameters) = false;
  /// After each reduction `.grad` aliases the bucket instead of holding a copy (saves memory).
  TORCH_ARG(bool, gradient_as_bucket_view) = false;
};

/// Accelerate's GradScalerKwargs (torch.amp.GradScaler's defaults), used for fp16 on CUDA.
struct GradScalerKwargs {
  TORCH_ARG(double, init_scale) = 65536.0;
  TORCH_ARG(double, growth_factor) = 2.0;
  TORCH_ARG(double, backoff_factor) = 0.5;
  TORCH_ARG(int64_t, growth_interval) = 2000;
  TORCH_ARG(bool, enabled) = true;
};

/// Accelerate's GradientAccumulationPlugin (the step count itself is
/// AcceleratorOptions::gradient_accumulation_steps).
struct GradientAccumulationPlugin {
  /// Step the optimizer (and sync) at the end of the data loader even mid-cycle, and restart the
  /// count there.
  TORCH_ARG(bool, sync_with_dataloader) = true;
  /// All-reduce gradients on every batch even while accumulating (less memory traffic on some
  /// setups, more communication).
  TORCH_ARG(bool, sync_each_batch) = false;
};

struct AcceleratorOptions {
  /// Force CPU even when CUDA is available (env ACCELERATE_USE_CPU).
  TORCH_ARG(std::optional<bool>, cpu);
  /// env ACCELERATE_MIXED_PRECISION; default NO.
  TORCH_ARG(std::optional<MixedPrecision>, mixed_precision);
  /// env ACCELERATE_GRADIENT_ACCUMULATION_STEPS; default 1.
  TORCH_ARG(std::optional<int64_t>, gradient_accumulation_steps);
  /// Move prepared models and loader batches to device() (Accelerate: device_placement).
  TORCH_ARG(bool, device_placement) = true;
  /// Each process gets a slice of every global batch instead of whole batches.
  TORCH_ARG(bool, split_batches) = false;
  /// Complete the last group of batches so every rank sees the same number of batches.
  TORCH_ARG(bool, even_batches) = true;
  /// A prepared scheduler steps once per optimizer step (times num_processes unless split_batches).
  TORCH_ARG(bool, step_scheduler_with_optimizer) = true;
  /// A prepared scheduler steps num_processes times per optimizer step (Accelerate's behaviour,
  /// unless split_batches); false: once per optimizer step, for schedules sized in optimizer steps.
  TORCH_ARG(bool, scheduler_steps_per_process) = true;
  TORCH_ARG(DistributedDataParallelKwargs, ddp) = {};
  TORCH_ARG(GradScalerKwargs, grad_scaler) = {};
  TORCH_ARG(GradientAccumulationPlugin, gradient_accumulation_plugin) = {};
  /// Given: FSDP (docs/fsdp.md), as ACCELERATE_USE_FSDP=true; its unset fields come from FSDP_*.
  TORCH_ARG(std::optional<FullyShardedDataParallelPlugin>, fsdp_plugin);
  /// Where save_state writes and how checkpoints are named (Accelerate's project_config).
  TORCH_ARG(ProjectConfiguration, project_config) = {};
  /// The backend of CUDA tensors' collectives (Accelerate's InitProcessGroupKwargs.backend): "nccl",
  /// the default on a GPU, needs a GPU of its own for each rank; "gloo" lets ranks share a GPU
  /// (CUDA tensors travel through host memory: slower). CPU tensors always go through Gloo.
  TORCH_ARG(std::optional<std::string>, backend);
  /// Deadline of every collective and of the rendezvous; default 1800 s (Gloo) / 600 s (NCCL).
  TORCH_ARG(std::optional<std::chrono::milliseconds>, timeout);
  /// After this long in one collective (default 60 s), a waiting rank prints once where it waits and
  /// which ranks have not reached it, then waits on until the timeout; zero: never. CPU collectives
  /// (Gloo); NCCL's watchdog reports its own.
  TORCH_ARG(std::optional<std::chrono::milliseconds>, stall_report_interval);
  /// Trackers that init_trackers() starts and log() feeds: "tensorboard", "jsonl", "csv",
  /// "all", a std::shared_ptr to your own acc::GeneralTracker, or a braced list of them.
  TORCH_ARG(LogWith, log_with);
  /// Where the launch and ACCELERATE_* variables are read from (tests pass a fake).
  TORCH_ARG(EnvLookup, environment) = process_environment();
};

/// AcceleratorOptions after applying the environment and defaults.
struct ResolvedOptions {
  bool cpu = false;
  MixedPrecision mixed_precision = MixedPrecision::NO;
  int64_t gradient_accumulation_steps = 1;
  bool use_fsdp = false;
  ResolvedFsdpPlugin fsdp;  // meaningful when use_fsdp
  std::optional<std::string> torch_device;  // ACCELERATE_TORCH_DEVICE
  std::optional<std::string> backend;       // "nccl" or "gloo" when given
};

/// Applies argument > environment > default. Throws ConfigError naming the bad variable.
ResolvedOptions resolve_options(const AcceleratorOptions& options);

/// Parses Accelerate's booleans: y/yes/t/true/on/1 and n/no/f/false/off/0 (case-insensitive).
bool parse_env_bool(const std::string& name, const std::string& value);

}  // namespace acc
