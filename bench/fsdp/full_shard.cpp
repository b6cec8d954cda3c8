// FSDP FULL_SHARD against SHARD_GRAD_OP and DDP on a ~200M-parameter transformer-like model, Adam,
// 2 (and 4) CPU ranks on loopback. Each (strategy, ranks) pair runs in its own processes, so peak RSS
// belongs to one strategy. Per rank (rank 0 printed):
//   model state  bytes of parameters, gradients and Adam state acc holds between steps, counted from
//                the distinct storages behind the model's parameters, the optimizer's parameters
//                (shards under FSDP), their .grad and Adam's state
//   peak RSS     the process's high-water mark
//   step         median wall time of zero_grad + forward + backward + step (FULL_SHARD also without
//                prefetch, to show the share of its extra time that prefetch hides)
// Prints FULL_SHARD/DDP and FULL_SHARD/SHARD_GRAD_OP ratios against the targets: model state <= 1/N
// + 10% of DDP's, peak RSS below SHARD_GRAD_OP's, step time <= 1.3x SHARD_GRAD_OP's.
//
// Usage: acc_bench_fsdp_full_shard [steps [ranks...]]   (default: 3 steps on 2 ranks)
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include <acc/acc.h>

#include "held_bytes.h"
#include "memory.h"
#include "rank_result.h"
#include "spawn.h"
#include "timing.h"
#include "transformer_block.h"

namespace {
using acc::bench::median;
using acc::bench::peak_rss_mb;

constexpr int64_t kDim = 1024, kHeads = 16, kBlocks = 16, kVocab = 8192, kSeq = 64, kBatch = 2;

using acc::testing::TransformerBlock;

struct LmImpl : torch::nn::Module {
  LmImpl() {
    embed = register_module("embed", torch::nn::Embedding(kVocab, kDim));
    for (int64_t i = 0; i < kBlocks; ++i) {
      blocks.push_back(register_module("block" + std::to_string(i), TransformerBlock(kDim, kHeads, 4 * kDim)));
    }
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})));
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(kDim, kVocab).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    acc::ForwardHooksGuard forward_hooks(*this);
    auto x = embed->forward(tokens);
    for (auto& block : blocks) x = block->forward(x);
    return head->forward(norm->forward(x));
  }
  torch::nn::Embedding embed{nullptr};
  std::vector<TransformerBlock> blocks;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Lm);

int64_t model_state_bytes(torch::nn::Module& model, torch::optim::Optimizer& optimizer) {
  std::unordered_set<const void*> seen;
  int64_t total = 0;
  auto add_storage = [&](const torch::Tensor& t) {
    if (t.defined() && seen.insert(t.storage().unsafeGetStorageImpl()).second) {
      total += static_cast<int64_t>(t.storage().nbytes());
    }
  };
  for (const auto& p : model.parameters()) add_storage(p);
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) add_storage(p);
  }
  return total + acc::testing::gradient_and_adam_state_bytes(model, optimizer);
}

int run_rank(const std::string& strategy, int steps) {
  auto options = acc::AcceleratorOptions();
  if (strategy != "DDP") {
    // FULL_SHARD without prefetch: how much of the all-gathers prefetch takes off the step.
    const bool no_prefetch = strategy == "FULL_SHARD_NO_PREFETCH";
    const auto sharding = acc::parse_sharding_strategy(no_prefetch ? "FULL_SHARD" : strategy, "argument");
    options.fsdp_plugin(acc::FullyShardedDataParallelPlugin()
                            .sharding_strategy(sharding)
                            .backward_prefetch(no_prefetch ? acc::BackwardPrefetch::NO_PREFETCH
                                                           : acc::BackwardPrefetch::BACKWARD_PRE)
                            .auto_wrap_policy(acc::AutoWrapPolicy::TRANSFORMER_BASED_WRAP)
                            .transformer_cls_names_to_wrap(std::vector<std::string>{"TransformerBlock"}));
  }
  acc::Accelerator accelerator(options);
  torch::manual_seed(0);
  Lm model;
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(1e-4));
  accelerator.prepare(model, optimizer);
  auto tokens = torch::randint(kVocab, {kBatch, kSeq + 1});
  std::vector<double> times;
  int64_t held = 0;
  for (int i = 0; i < steps + 1; ++i) {  // 1 warm-up step
    accelerator.wait_for_everyone();
    const auto start = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    auto logits = model->forward(tokens.narrow(1, 0, kSeq));
    auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, kVocab}),
                                                     tokens.narrow(1, 1, kSeq).reshape({-1}));
    accelerator.backward(loss);
    optimizer.step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= 1) times.push_back(ms);
    held = model_state_bytes(*model, optimizer);  // after the step, before the next zero_grad
  }
  std::printf("RESULT %lld %.1f %.2f\n", static_cast<long long>(held), peak_rss_mb(), median(times));
  accelerator.end_training();
  return 0;
}

struct Measure {
  double state_mb = 0, rss_mb = 0, step_ms = 0;
};

Measure measure(const std::string& strategy, int ranks, int steps) {
  auto in = acc::bench::rank0_result({strategy, std::to_string(steps)}, ranks, std::chrono::minutes(20));
  Measure m;
  long long held = 0;
  in >> held >> m.rss_mb >> m.step_ms;
  m.state_mb = held / 1048576.0;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RANK") != nullptr && argc > 2) return run_rank(argv[1], std::atoi(argv[2]));
  const int steps = argc > 1 ? std::atoi(argv[1]) : 3;
  const double params = kVocab * kDim * 2 + kDim * 2 +
                        kBlocks * (kDim * 3 * kDim + kDim * kDim + kDim + 8 * kDim * kDim + 5 * kDim + 4 * kDim);
  std::printf("FSDP FULL_SHARD vs SHARD_GRAD_OP vs DDP, Gloo on loopback, transformer-like %lld blocks x %lld "
              "(%.0fM parameters), Adam, %lld x %lld tokens per rank, %d steps (median), rank 0:\n",
              static_cast<long long>(kBlocks), static_cast<long long>(kDim), params / 1e6,
              static_cast<long long>(kBatch), static_cast<long long>(kSeq), steps);
  std::vector<int> rank_counts;
  for (int i = 2; i < argc; ++i) rank_counts.push_back(std::atoi(argv[i]));
  if (rank_counts.empty()) rank_counts = {2};
  for (int ranks : rank_counts) {
    const auto ddp = measure("DDP", ranks, steps);
    const auto zero2 = measure("SHARD_GRAD_OP", ranks, steps);
    const auto full = measure("FULL_SHARD", ranks, steps);
    const auto unprefetched = measure("FULL_SHARD_NO_PREFETCH", ranks, steps);
    std::printf("%d ranks:\n", ranks);
    for (const auto& [name, m] :
         {std::pair<const char*, Measure>{"DDP", ddp}, {"SHARD_GRAD_OP", zero2}, {"FULL_SHARD", full},
          {"  no prefetch", unprefetched}}) {
      std::printf("  %-14s model state %8.1f MiB  peak RSS %8.1f MiB  step %9.1f ms\n", name, m.state_mb, m.rss_mb,
                  m.step_ms);
    }
    const double state_ratio = full.state_mb / ddp.state_mb, state_target = 1.0 / ranks * 1.1;
    const double rss_ratio = full.rss_mb / zero2.rss_mb, time_ratio = full.step_ms / zero2.step_ms;
    std::printf("  FULL_SHARD/DDP model state     = %.3f (target <= 1.1/%d = %.3f) %s\n", state_ratio, ranks,
                state_target, state_ratio <= state_target ? "met" : "MISSED");
    std::printf("  FULL_SHARD/SHARD_GRAD_OP RSS   = %.3f (target < 1) %s\n", rss_ratio,
                rss_ratio < 1 ? "met" : "MISSED");
    std::printf("  FULL_SHARD/DDP peak RSS        = %.3f\n", full.rss_mb / ddp.rss_mb);
    std::printf("  FULL_SHARD/SHARD_GRAD_OP step  = %.3f (target <= 1.30) %s\n", time_ratio,
                time_ratio <= 1.3 ? "met" : "MISSED");
    // What FULL_SHARD adds to SHARD_GRAD_OP's step is mostly its all-gathers; the share of that extra
    // time prefetch removes is the share of all-gather time it hides behind compute.
    const double extra = unprefetched.step_ms - zero2.step_ms;
    const double hidden = extra > 0 ? 100.0 * (unprefetched.step_ms - full.step_ms) / extra : 0.0;
    std::printf("  prefetch: step %.3f of FULL_SHARD without it; hides %.0f%% of the time FULL_SHARD adds\n",
                full.step_ms / unprefetched.step_ms, hidden);
  }
  return 0;
}
