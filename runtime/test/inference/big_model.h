#pragma once
// The models of the big-model inference tests: a transformer-like Sequential (every unit a child acc
// calls) and the same layers under a custom root whose blocks carry the guard line.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "transformer_block.h"

namespace acc::testing {

constexpr int64_t kVocab = 64, kDim = 32, kHeads = 4, kHidden = 64, kBlocks = 4;

inline torch::nn::Sequential sequential_lm() {
  torch::nn::Sequential lm;
  lm->push_back("embed", torch::nn::Embedding(kVocab, kDim));
  for (int64_t i = 0; i < kBlocks; ++i) {
    lm->push_back("block" + std::to_string(i), TransformerBlock(kDim, kHeads, kHidden));
  }
  lm->push_back("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})));
  lm->push_back("head", torch::nn::Linear(kDim, kVocab));
  return lm;
}

struct GuardedLMImpl : torch::nn::Module {
  GuardedLMImpl() {
    embed = register_module("embed", torch::nn::Embedding(kVocab, kDim));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < kBlocks; ++i) blocks->push_back(TransformerBlock(kDim, kHeads, kHidden));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})));
    head = register_module("head", torch::nn::Linear(kDim, kVocab));
  }
  torch::Tensor forward(torch::Tensor ids) {
    auto x = embed->forward(ids);
    for (const auto& block : *blocks) x = block->as<TransformerBlockImpl>()->forward(x);
    return head->forward(norm->forward(x));
  }
  torch::nn::Embedding embed{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(GuardedLM);

}  // namespace acc::testing
