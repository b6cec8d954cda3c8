#pragma once
// A pre-norm transformer block (causal attention + MLP + two LayerNorms) whose forward starts with
// the forward seam: the FULL_SHARD unit of the FSDP tests and benchmark. The qkv projection has no
// bias: the key bias's gradient is zero in exact arithmetic (softmax ignores a constant per row),
// so it would be rounding noise that Adam amplifies differently in each reference run.
#include <torch/nn/functional/activation.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include <acc/hooks.h>

namespace acc::testing {

struct TransformerBlockImpl : torch::nn::Module {
  TransformerBlockImpl(int64_t dim, int64_t heads, int64_t hidden) : dim(dim), heads(heads) {
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(false)));
    out = register_module("out", torch::nn::Linear(dim, dim));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    up = register_module("up", torch::nn::Linear(dim, hidden));
    down = register_module("down", torch::nn::Linear(hidden, dim));
  }
  torch::Tensor forward(torch::Tensor x) {
    acc::ForwardHooksGuard forward_hooks(*this);
    const auto b = x.size(0), t = x.size(1);
    auto parts = qkv->forward(norm1->forward(x)).view({b, t, 3, heads, dim / heads}).permute({2, 0, 3, 1, 4});
    auto scores = torch::matmul(parts[0], parts[1].transpose(-2, -1)) / std::sqrt(double(dim / heads));
    auto mask = torch::ones({t, t}, x.options().dtype(torch::kBool)).triu(1);
    // -inf, not a large negative number: fp16 scores cannot hold -1e9; the diagonal is never masked.
    const auto masked = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    auto attended = torch::matmul(masked.softmax(-1), parts[2]);
    x = x + out->forward(attended.permute({0, 2, 1, 3}).reshape({b, t, dim}));
    return x + down->forward(torch::gelu(up->forward(norm2->forward(x))));
  }
  int64_t dim, heads;
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear qkv{nullptr}, out{nullptr}, up{nullptr}, down{nullptr};
};
TORCH_MODULE(TransformerBlock);

}  // namespace acc::testing
