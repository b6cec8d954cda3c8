#pragma once
// Facts about this machine, found without libtorch: GPUs from the NVIDIA driver's /proc entries (fast
// enough for every launch) or nvidia-smi (for acc-env), cores, memory, the libtorch install.
#include <optional>
#include <string>
#include <vector>

#include "launch_plan.h"

namespace acc::launcher {

// GPU count honours CUDA_VISIBLE_DEVICES (from `env`) as CUDA will in the ranks.
MachineFacts probe_machine(const EnvMap& env);

int usable_cpu_count();
double total_memory_gib();
std::string platform_description();  // "Linux 6.1.0 x86_64 (Debian GNU/Linux 12 (bookworm))"
std::string compiler_description();  // of this build

// Runs a program with arguments, without a shell, and returns its stdout, or nullopt when it cannot be
// run, fails, or takes longer than `timeout_s` (then it is killed).
std::optional<std::string> capture_output(const std::vector<std::string>& argv, double timeout_s);

struct TorchInstall {
  std::string location;  // site-packages/torch or a libtorch directory
  std::string version;
  std::string cuda;  // "13.0", or empty for a CPU build
  std::string nccl;  // from the pip wheel's nvidia packages, empty if unknown
  std::string cudnn;
};
// Looks in $ACC_TORCH_DIR (a libtorch directory or a torch Python package), then in the acc venv
// ($ACC_VENV, default ~/.cache/acc/venv) that the build takes libtorch from.
std::optional<TorchInstall> find_torch(const EnvMap& env);

}  // namespace acc::launcher
