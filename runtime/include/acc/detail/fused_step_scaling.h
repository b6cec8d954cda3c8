#pragma once
// What a loss scaler (amp/, <acc/grad_scaler.h>) gives an optimizer's fused step (optim/,
// <acc/optimizer.h>). Its own header so that neither of the two includes the other.
#include <ATen/core/Tensor.h>

#include <optional>

namespace acc {

/// What a loss scaler hands the fused kernels (torch's `grad_scale` and `found_inf` arguments): the
/// kernel divides the gradients by `grad_scale` (unset: they are unscaled already) and leaves the
/// parameters, their state and the step count alone where `found_inf` is nonzero. The decision to
/// skip an overflowing step is made on the device, so the host never waits for it.
struct FusedStepScaling {
  std::optional<at::Tensor> grad_scale;
  std::optional<at::Tensor> found_inf;
};

}  // namespace acc
