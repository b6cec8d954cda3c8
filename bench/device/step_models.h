#pragma once
// The two models of scripts/device-check's step comparison, built as device_step.py builds them (the
// same modules in the same order, so one seed gives both sides the same weights):
// - lm: a transformer-like LM (compute-bound on an H100: 218M parameters at the default sizes);
// - cnn: 3 conv3x3-BatchNorm-ReLU blocks 3->64->128->256, pooled into a 10-way linear head, on a
//   batch of 32x32 images: launch-bound (a few ms per step), where the host's speed shows.
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <string>
#include <vector>

#include "transformer_block.h"

namespace acc::bench {

constexpr int64_t kVocab = 8192;

struct LmImpl : torch::nn::Module {
  LmImpl(int64_t dim, int64_t blocks_count) {
    embed = register_module("embed", torch::nn::Embedding(kVocab, dim));
    for (int64_t i = 0; i < blocks_count; ++i) {
      blocks.push_back(register_module("block" + std::to_string(i),
                                       acc::testing::TransformerBlock(dim, dim / 64, 4 * dim)));
    }
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(dim, kVocab).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    auto x = embed->forward(tokens);
    for (auto& block : blocks) x = block->forward(x);
    return head->forward(norm->forward(x));
  }
  torch::nn::Embedding embed{nullptr};
  std::vector<acc::testing::TransformerBlock> blocks;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Lm);

struct CnnImpl : torch::nn::Module {
  CnnImpl() {
    const int64_t widths[] = {3, 64, 128, 256};
    for (int i = 0; i < 3; ++i) {
      convs.push_back(register_module("conv" + std::to_string(i),
                                      torch::nn::Conv2d(torch::nn::Conv2dOptions(widths[i], widths[i + 1], 3).padding(1))));
      norms.push_back(register_module("norm" + std::to_string(i), torch::nn::BatchNorm2d(widths[i + 1])));
    }
    head = register_module("head", torch::nn::Linear(256, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < convs.size(); ++i) x = torch::relu(norms[i]->forward(convs[i]->forward(x)));
    return head->forward(x.mean({2, 3}));
  }
  std::vector<torch::nn::Conv2d> convs;
  std::vector<torch::nn::BatchNorm2d> norms;
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Cnn);

}  // namespace acc::bench
