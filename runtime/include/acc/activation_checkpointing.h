#pragma once
// Activation checkpointing for C++ (torch.utils.checkpoint, which libtorch lacks): run a piece of
// the forward without keeping its activations, and recompute it when backward reaches it. Trades
// one extra forward of the piece for its activation memory. See docs/hooks.md.
//
//   x = acc::checkpoint([&](const torch::Tensor& h) { return block->forward(h); }, x);
//
// - The function must compute the same thing when called again (the CPU and the inputs' devices'
//   random states are restored for the recomputation, so dropout draws the same mask).
// - Gradients reach the parameters the function uses through their own accumulators, in the
//   backward that reaches the checkpoint, so DDP and FSDP hooks see them as without checkpointing.
// - Outside grad mode (eval, NoGradGuard) it just calls the function.
#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace acc {

at::Tensor checkpoint(const std::function<at::Tensor(const std::vector<at::Tensor>&)>& function,
                         const std::vector<at::Tensor>& inputs);
at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& function, const at::Tensor& input);

}  // namespace acc
