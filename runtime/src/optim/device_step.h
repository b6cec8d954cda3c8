#pragma once
// The step count of a parameter's state as the fused kernels want it: a float32 scalar on the
// parameter's device, incremented there (as torch keeps `state["step"]` for fused=True). Building
// the counts on the host each step meant a copy from pageable memory, which CUDA performs only once
// the stream has drained: the host stopped queueing work once per step.
//
// libtorch's integer `step` stays the count checkpoints, FSDP and an unfused step read. The host
// keeps it current itself (+1 per fused step, no device read) except where a loss scaler let the
// kernel skip steps on the device; then it is written back from the device when the state is read
// (optimizer_state_fields' fields_of, serialize, clone, fused(false)).
#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <memory>
#include <utility>

namespace acc::detail {

/// The part of a DeviceStepped state that does not depend on its libtorch type.
class DeviceStepCount {
 public:
  virtual ~DeviceStepCount() = default;
  /// Brings libtorch's integer step up to date with the device's count. Reads the device (waits
  /// for the last step) only when a step may have been skipped there since the last write-back.
  virtual void write_back() = 0;
};

/// libtorch's `State` (AdamParamState, AdamWParamState) with the device copy of its step count.
/// It is still a `State` to everything that reads it; a copy (clone) is a plain `State`.
template <typename State>
class DeviceStepped final : public State, public DeviceStepCount {
 public:
  explicit DeviceStepped(State plain) : State(std::move(plain)) {}

  /// The count to pass to the kernel for this step, which the kernel's caller increments on the
  /// device first. Uploaded (a fill, not a copy) only when libtorch's step moved without the device:
  /// a fresh state, a loaded checkpoint, unfused steps in between.
  const at::Tensor& device_step(c10::Device device) {
    if (!device_step_.defined() || device_step_.device() != device || mirrored_ != State::step()) {
      device_step_ = at::full({}, static_cast<double>(State::step()), at::TensorOptions().dtype(at::kFloat).device(device));
      may_have_skipped_ = false;
    }
    return device_step_;
  }
  /// The host's side of one step: +1, as the device's, unless the device skips it (`skippable`).
  void count_step(bool skippable) {
    State::step(State::step() + 1);
    mirrored_ = State::step();
    may_have_skipped_ = may_have_skipped_ || skippable;
  }

  void write_back() override {
    if (!may_have_skipped_ || !device_step_.defined()) return;
    State::step(static_cast<int64_t>(device_step_.template item<float>()));
    mirrored_ = State::step();
    may_have_skipped_ = false;
  }
  void serialize(torch::serialize::OutputArchive& archive) const override {
    const_cast<DeviceStepped*>(this)->write_back();
    State::serialize(archive);
  }
  std::unique_ptr<torch::optim::OptimizerParamState> clone() const override {
    const_cast<DeviceStepped*>(this)->write_back();
    return std::make_unique<State>(static_cast<const State&>(*this));
  }

 private:
  at::Tensor device_step_;      // float32, 0-dim, on the parameter's device
  int64_t mirrored_ = -1;       // libtorch's step when device_step_ last agreed with it
  bool may_have_skipped_ = false;  // a found_inf flag reached the kernel since then
};

/// write_back() of `state` when it is a DeviceStepped one; nothing otherwise.
inline void write_back_step_count(torch::optim::OptimizerParamState& state) {
  if (auto* counted = dynamic_cast<DeviceStepCount*>(&state)) counted->write_back();
}

}  // namespace acc::detail
