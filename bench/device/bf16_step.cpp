// One process on the accelerator's device (a GPU where there is one), a transformer-like model
// trained with mixed precision through acc: the C++ side of scripts/device-check's comparison with
// Python Accelerate (bf16_step.py builds the same model, same sizes, same loop). Prints
//   RESULT <ms per step> <first loss> <last loss> <device>
// Usage: acc_bench_device_step [--fused] [bf16|fp16|no] [steps] [dim blocks batch seq]
// (--fused: acc::Optimizer::fused(true), ATen's fused AdamW kernel; without it libtorch's loop)
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <acc/acc.h>

#include "transformer_block.h"

namespace {

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

acc::MixedPrecision precision_named(const std::string& name) {
  if (name == "bf16") return acc::MixedPrecision::BF16;
  if (name == "fp16") return acc::MixedPrecision::FP16;
  if (name == "no") return acc::MixedPrecision::NO;
  std::fprintf(stderr, "acc_bench_device_step: precision must be bf16, fp16 or no, not '%s'\n", name.c_str());
  std::exit(2);
}

}  // namespace

int main(int raw_argc, char** raw_argv) {
  std::vector<char*> args;
  bool fused = false;
  for (int i = 0; i < raw_argc; ++i) {
    if (std::string(raw_argv[i]) == "--fused") {
      fused = true;
    } else {
      args.push_back(raw_argv[i]);
    }
  }
  const int argc = static_cast<int>(args.size());
  char** argv = args.data();
  const auto precision = precision_named(argc > 1 ? argv[1] : "bf16");
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const int64_t dim = argc > 3 ? std::atoll(argv[3]) : 1024, blocks = argc > 4 ? std::atoll(argv[4]) : 16;
  const int64_t batch = argc > 5 ? std::atoll(argv[5]) : 8, seq = argc > 6 ? std::atoll(argv[6]) : 512;

  acc::Accelerator accelerator(acc::AcceleratorOptions().mixed_precision(precision));
  const auto device = accelerator.device();
  torch::manual_seed(0);
  Lm model(dim, blocks);
  acc::Optimizer<torch::optim::AdamW> optimizer(model->parameters(), torch::optim::AdamWOptions(1e-4));
  optimizer.fused(fused);
  accelerator.prepare(model, optimizer);
  // The same batch every step: the loss must fall, which checks the step did something.
  auto tokens = torch::randint(kVocab, {batch, seq + 1}, torch::TensorOptions().dtype(torch::kLong).device(device));
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  double first = 0, last = 0;
  std::chrono::steady_clock::time_point start;
  for (int i = 0; i < steps + 3; ++i) {  // 3 warm-up steps
    if (i == 3) {
      sync();
      start = std::chrono::steady_clock::now();
    }
    optimizer.zero_grad();
    torch::Tensor loss;
    {
      auto autocast = accelerator.autocast();
      auto logits = model->forward(tokens.narrow(1, 0, seq));
      loss = torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}).to(torch::kFloat),
                                                  tokens.narrow(1, 1, seq).reshape({-1}));
    }
    accelerator.backward(loss);
    optimizer.step();
    if (i == 0) first = loss.item<double>();
  }
  sync();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  const double ms = std::chrono::duration<double, std::milli>(elapsed).count() / steps;
  // Read after the timing: item() synchronises, which would serialise the timed steps.
  {
    torch::NoGradGuard no_grad;
    auto autocast = accelerator.autocast();
    auto logits = model->forward(tokens.narrow(1, 0, seq)).reshape({-1, kVocab}).to(torch::kFloat);
    last = torch::nn::functional::cross_entropy(logits, tokens.narrow(1, 1, seq).reshape({-1})).item<double>();
  }
  std::printf("RESULT %.3f %.4f %.4f %s\n", ms, first, last, device.str().c_str());
  return 0;
}
