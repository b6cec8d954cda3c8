#pragma once
// The model structures of the device-map tests and of the parity with Accelerate
// (device_map_parity.py builds the same ones in Python: same class names without "Impl", same
// attribute names, registration order and shapes).
//
// - TinyLM: embedding, N Blocks (attention with q/k/v/o Linears and a bool mask buffer, an MLP,
//   two LayerNorms), a final LayerNorm, an LmHead whose weight is the embedding's (tied), and an
//   int64 buffer of the root.
// - a Sequential MLP (torch::nn::Sequential of Linear and ReLU).
// - Nested: a root parameter, two Stacks of Blocks that share one projection module, a
//   BatchNorm1d between them, and an LmHead tied to a weight inside the first Stack.
// - Echo: a root "head" tied to "body.head" (Accelerate's substring test of "inside a module").
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cstdint>
#include <memory>
#include <string>

namespace acc::testing {

struct ModelConfig {
  int64_t layers = 4;
  int64_t dim = 64;
  int64_t hidden = 256;
  int64_t vocab = 512;
  int64_t context = 16;
};

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(int64_t dim, int64_t context) {
    q = register_module("q", torch::nn::Linear(dim, dim));
    k = register_module("k", torch::nn::Linear(dim, dim));
    v = register_module("v", torch::nn::Linear(dim, dim));
    o = register_module("o", torch::nn::Linear(dim, dim));
    register_buffer("mask", torch::ones({context, context}, torch::kBool).tril());
  }
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr};
};
TORCH_MODULE(Attention);

struct MLPImpl : torch::nn::Module {
  MLPImpl(int64_t dim, int64_t hidden) {
    up = register_module("up", torch::nn::Linear(dim, hidden));
    down = register_module("down", torch::nn::Linear(hidden, dim));
  }
  torch::nn::Linear up{nullptr}, down{nullptr};
};
TORCH_MODULE(MLP);

struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const ModelConfig& c) {
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.dim})));
    attn = register_module("attn", Attention(c.dim, c.context));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.dim})));
    mlp = register_module("mlp", MLP(c.dim, c.hidden));
  }
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  Attention attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

/// An output projection whose weight is another module's tensor (tied), with a bias of its own.
struct LmHeadImpl : torch::nn::Module {
  LmHeadImpl(const torch::Tensor& tied_weight) {
    weight = register_parameter("weight", tied_weight);
    bias = register_parameter("bias", torch::zeros({tied_weight.size(0)}));
  }
  torch::Tensor weight, bias;
};
TORCH_MODULE(LmHead);

struct TinyLMImpl : torch::nn::Module {
  explicit TinyLMImpl(const ModelConfig& c) {
    embed = register_module("embed", torch::nn::Embedding(c.vocab, c.dim));
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.layers; ++i) layers->push_back(Block(c));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.dim})));
    lm_head = register_module("lm_head", LmHead(embed->weight));
    register_buffer("position_ids", torch::arange(c.context, torch::kLong));
  }
  torch::nn::Embedding embed{nullptr};
  torch::nn::ModuleList layers{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  LmHead lm_head{nullptr};
};
TORCH_MODULE(TinyLM);

inline torch::nn::Sequential make_mlp(const ModelConfig& c) {
  return torch::nn::Sequential(torch::nn::Linear(c.dim, c.hidden), torch::nn::ReLU(),
                               torch::nn::Linear(c.hidden, c.hidden), torch::nn::ReLU(),
                               torch::nn::Linear(c.hidden, c.vocab));
}

struct StackImpl : torch::nn::Module {
  StackImpl(const ModelConfig& c, torch::nn::Linear shared_proj) {
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.layers; ++i) blocks->push_back(Block(c));
    proj = register_module("proj", shared_proj.is_empty() ? torch::nn::Linear(c.dim, c.dim) : shared_proj);
  }
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::Linear proj{nullptr};
};
TORCH_MODULE(Stack);

struct NestedImpl : torch::nn::Module {
  explicit NestedImpl(const ModelConfig& c) {
    scale = register_parameter("scale", torch::ones({c.dim}));
    encoder = register_module("encoder", Stack(c, torch::nn::Linear(nullptr)));
    bn = register_module("bn", torch::nn::BatchNorm1d(c.dim));
    decoder = register_module("decoder", Stack(c, encoder->proj));  // one module under two names
    head = register_module("head", LmHead(encoder->blocks->ptr<BlockImpl>(0)->attn->q->weight));
    register_buffer("steps", torch::zeros({1}, torch::kLong));
  }
  torch::Tensor scale;
  Stack encoder{nullptr}, decoder{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
  LmHead head{nullptr};
};
TORCH_MODULE(Nested);

struct BodyImpl : torch::nn::Module {
  explicit BodyImpl(const ModelConfig& c) {
    pre = register_module("pre", torch::nn::Linear(c.dim, c.hidden));
    head = register_module("head", torch::nn::Linear(c.hidden, c.dim));
  }
  torch::nn::Linear pre{nullptr}, head{nullptr};
};
TORCH_MODULE(Body);

/// A root module named like a module inside another ("head" and "body.head") with the two tied:
/// Accelerate tests "inside a module" with a substring test, which this makes visible.
struct EchoImpl : torch::nn::Module {
  explicit EchoImpl(const ModelConfig& c) {
    Body made(c);
    head = register_module("head", LmHead(made->head->weight));  // registered first: placed first
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.dim})));
    body = register_module("body", made);
  }
  Body body{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  LmHead head{nullptr};
};
TORCH_MODULE(Echo);

/// "transformer", "mlp", "nested" or "echo".
inline std::shared_ptr<torch::nn::Module> make_model(const std::string& name, const ModelConfig& c) {
  if (name == "transformer") return TinyLM(c).ptr();
  if (name == "mlp") return make_mlp(c).ptr();
  if (name == "nested") return Nested(c).ptr();
  if (name == "echo") return Echo(c).ptr();
  throw std::invalid_argument("unknown model '" + name + "'");
}

}  // namespace acc::testing
