#include <acc/errors.h>
#include <acc/state.h>
#include <acc/warnings.h>

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <mutex>

#include "comm/ignore_sigpipe.h"
#include "comm/process_group.h"
#include "comm/state_slot.h"

namespace acc {

namespace detail {
struct SharedState {
  LaunchInfo launch;
  c10::Device device{c10::kCPU};
  CudaCollectives cuda = CudaCollectives::kNone;
  std::optional<Milliseconds> timeout;
  std::unique_ptr<ProcessGroup> group;
};

namespace {
std::mutex state_mutex;
std::shared_ptr<SharedState>& state_slot() {
  static std::shared_ptr<SharedState> state;
  return state;
}

c10::Device choose_device(const LaunchInfo& launch, const ResolvedOptions& resolved) {
  if (resolved.torch_device) {
    try {
      return c10::Device(*resolved.torch_device);
    } catch (const std::exception&) {
      throw ConfigError("acc: ACCELERATE_TORCH_DEVICE='" + *resolved.torch_device +
                        "' is not a device; use e.g. cpu or cuda:0");
    }
  }
  if (!resolved.cpu && torch::cuda::is_available()) {
    auto count = static_cast<int>(torch::cuda::device_count());
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(launch.local_rank % count));
  }
  return c10::Device(c10::kCPU);
}

// NCCL on a GPU unless Gloo is asked for; a CPU process has no CUDA collectives.
CudaCollectives choose_cuda_collectives(c10::Device device, const ResolvedOptions& resolved) {
  if (!device.is_cuda()) {
    if (resolved.backend == "nccl") {
      throw ConfigError("acc: backend(\"nccl\") needs CUDA, and this process runs on " + device.str() +
                        " (cpu(true), ACCELERATE_USE_CPU, ACCELERATE_TORCH_DEVICE or no GPU); leave "
                        "backend unset or pass \"gloo\"");
    }
    return CudaCollectives::kNone;
  }
  return resolved.backend == "gloo" ? CudaCollectives::kGloo : CudaCollectives::kNccl;
}

std::shared_ptr<SharedState> create_state(const AcceleratorOptions& options) {
  auto resolved = resolve_options(options);
  auto state = std::make_shared<SharedState>();
  state->launch = detect_launch(options.environment());
  detail::set_warning_local_rank(state->launch.local_rank);
  state->timeout = options.timeout();
  state->device = choose_device(state->launch, resolved);
  state->cuda = choose_cuda_collectives(state->device, resolved);
  if (state->device.is_cuda()) {
    // NCCL and CUDA allocations of this rank go to its own GPU.
    c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(state->device);
  }
  if (state->launch.is_distributed()) {
    // Before the first socket: a peer that dies must be an error in Gloo or the store, not signal 13
    // here (comm/ignore_sigpipe.h says why).
    ignore_sigpipe_unless_handled();
    state->group = std::make_unique<ProcessGroup>(state->launch, state->cuda, state->timeout);
    if (options.stall_report_interval()) state->group->set_stall_report_interval(*options.stall_report_interval());
  }
  return state;
}
}  // namespace

bool partial_state_exists() {
  std::lock_guard<std::mutex> lock(state_mutex);
  return state_slot() != nullptr;
}
}  // namespace detail

PartialState::PartialState(const AcceleratorOptions& options) {
  std::lock_guard<std::mutex> lock(detail::state_mutex);
  auto& slot = detail::state_slot();
  if (!slot) {
    slot = detail::create_state(options);
  } else {
    // Later Accelerators share the first one's device; one that would pick another is an error.
    const auto resolved = resolve_options(options);
    auto wanted = detail::choose_device(slot->launch, resolved);
    // An unset backend takes the first Accelerator's; a different one given is an error.
    if (wanted == slot->device && resolved.backend &&
        detail::choose_cuda_collectives(wanted, resolved) != slot->cuda) {
      throw ConfigError("acc: this process's collectives already run on " +
                        std::string(slot->cuda == detail::CudaCollectives::kGloo ? "Gloo" : "NCCL") +
                        "; a second Accelerator cannot change the backend. Give every Accelerator the "
                        "same backend option, or call acc::PartialState::destroy() between them");
    }
    if (wanted != slot->device) {
      throw ConfigError("acc: this process already runs on " + slot->device.str() +
                        "; a second Accelerator cannot move it to " + wanted.str() +
                        ". Create every Accelerator with the same cpu option, or call "
                        "acc::PartialState::destroy() between them");
    }
  }
  shared_ = slot;
}

const LaunchInfo& PartialState::launch() const { return shared_->launch; }
c10::Device PartialState::device() const { return shared_->device; }
int PartialState::num_processes() const { return shared_->launch.world_size; }
int PartialState::process_index() const { return shared_->launch.rank; }
int PartialState::local_process_index() const { return shared_->launch.local_rank; }

DistributedType PartialState::distributed_type() const {
  if (!use_distributed()) return DistributedType::NO;
  return device().is_cuda() ? DistributedType::MULTI_GPU : DistributedType::MULTI_CPU;
}

detail::ProcessGroup* PartialState::process_group() const { return shared_->group.get(); }

uint64_t PartialState::num_collectives() const {
  return shared_->group ? shared_->group->num_collectives() : 0;
}

void PartialState::wait_for_everyone() const {
  if (auto* group = process_group()) group->barrier("wait_for_everyone");
}

void PartialState::destroy() {
  std::lock_guard<std::mutex> lock(detail::state_mutex);
  auto& slot = detail::state_slot();
  if (slot) slot->group.reset();
  slot.reset();
}

}  // namespace acc
