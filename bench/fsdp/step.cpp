// FSDP SHARD_GRAD_OP against DDP: per-rank memory and step time on 2 and 4 CPU ranks (Gloo,
// loopback), an MLP of about 50M parameters, Adam. Each (strategy, ranks) pair runs in its own
// processes, DDP and SHARD_GRAD_OP alternating, so that peak RSS belongs to one strategy.
// Per rank it measures:
//   grad+state  bytes of gradients and Adam state acc leaves held after a step (the model's and
//               the optimizer's .grad, exp_avg, exp_avg_sq); DDP's reducer buckets not counted,
//               which favours DDP
//   peak RSS    the process's high-water mark (parameters, activations, transient buffers)
//   step        median wall time of zero_grad + forward + backward + step
// Prints ratios SHARD_GRAD_OP/DDP with the targets grad+state <= 1.05/N and step <= 1.2.
//
// Usage: acc_bench_fsdp_step [steps [ranks...]]   (default: 8 steps on 2 and 4 ranks)
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <acc/acc.h>

#include "held_bytes.h"
#include "memory.h"
#include "mlp.h"
#include "rank_result.h"
#include "spawn.h"
#include "timing.h"

namespace {
using acc::bench::median;
using acc::bench::peak_rss_mb;

constexpr int kLayers = 12;
constexpr int kWidth = 2048;  // 12 x (2048 x 2048 + 2048) = 50.4M parameters
constexpr int kBatch = 16;

int run_rank(const std::string& strategy, int steps) {
  auto options = acc::AcceleratorOptions();
  if (strategy == "SHARD_GRAD_OP") {
    options.fsdp_plugin(acc::FullyShardedDataParallelPlugin().sharding_strategy(
        acc::ShardingStrategy::SHARD_GRAD_OP));
  }
  acc::Accelerator accelerator(options);
  torch::manual_seed(0);
  auto model = acc::bench::make_tanh_mlp(kLayers, kWidth);
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(1e-4));
  accelerator.prepare(model, optimizer);
  auto x = torch::randn({kBatch, kWidth});
  std::vector<double> times, backward_times;
  int64_t held = 0;
  for (int i = 0; i < steps + 2; ++i) {  // 2 warm-up steps
    accelerator.wait_for_everyone();
    const auto start = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    auto loss = model->forward(x).pow(2).mean();
    const auto backward_start = std::chrono::steady_clock::now();
    accelerator.backward(loss);
    const double backward_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - backward_start).count();
    optimizer.step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= 2) {
      times.push_back(ms);
      backward_times.push_back(backward_ms);
    }
    // After the step, before the next zero_grad.
    held = acc::testing::gradient_and_adam_state_bytes(*model, optimizer);
  }
  // One line per rank; the parent reads rank 0's (every rank holds the same amount up to padding).
  std::printf("RESULT %lld %.1f %.2f %.2f\n", static_cast<long long>(held), peak_rss_mb(), median(times),
              median(backward_times));
  accelerator.end_training();
  return 0;
}

struct Measure {
  double held_mb = 0, rss_mb = 0, step_ms = 0, backward_ms = 0;
};

Measure measure(const std::string& strategy, int ranks, int steps) {
  auto in = acc::bench::rank0_result({strategy, std::to_string(steps)}, ranks, std::chrono::minutes(8));
  Measure m;
  long long held = 0;
  in >> held >> m.rss_mb >> m.step_ms >> m.backward_ms;
  m.held_mb = held / 1048576.0;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RANK") != nullptr && argc > 2) return run_rank(argv[1], std::atoi(argv[2]));
  const int steps = argc > 1 ? std::atoi(argv[1]) : 8;
  std::printf("FSDP SHARD_GRAD_OP vs DDP, Gloo on loopback, MLP %d x %d (%.1fM parameters), Adam, "
              "batch %d per rank, %d steps (median), rank 0:\n",
              kLayers, kWidth, kLayers * (kWidth * kWidth + kWidth) / 1e6, kBatch, steps);
  std::vector<int> rank_counts;
  for (int i = 2; i < argc; ++i) rank_counts.push_back(std::atoi(argv[i]));
  if (rank_counts.empty()) rank_counts = {2, 4};
  for (int ranks : rank_counts) {
    // Alternating rounds; the faster of two runs of each strategy (noise only slows runs down).
    Measure ddp, fsdp;
    for (int round = 0; round < 2; ++round) {
      auto d = measure("DDP", ranks, steps);
      auto f = measure("SHARD_GRAD_OP", ranks, steps);
      if (round == 0 || d.step_ms < ddp.step_ms) ddp = d;
      if (round == 0 || f.step_ms < fsdp.step_ms) fsdp = f;
    }
    const double held_ratio = fsdp.held_mb / ddp.held_mb;
    const double held_target = 1.05 / ranks;  // 1/N, plus 5%
    const double time_ratio = fsdp.step_ms / ddp.step_ms;
    std::printf("%d ranks:\n", ranks);
    for (const auto& [name, m] : {std::pair<const char*, Measure>{"DDP", ddp}, {"SHARD_GRAD_OP", fsdp}}) {
      std::printf("  %-14s grad+state %8.1f MiB  peak RSS %8.1f MiB  step %8.1f ms (backward %8.1f)\n",
                  name, m.held_mb, m.rss_mb, m.step_ms, m.backward_ms);
    }
    std::printf("  ratio grad+state = %.3f (target <= 1.05/%d = %.3f) %s\n", held_ratio, ranks,
                held_target, held_ratio <= held_target ? "met" : "MISSED");
    std::printf("  ratio peak RSS   = %.3f\n", fsdp.rss_mb / ddp.rss_mb);
    std::printf("  ratio step time  = %.3f (target <= 1.20) %s\n", time_ratio,
                time_ratio <= 1.2 ? "met" : "MISSED");
  }
  return 0;
}
