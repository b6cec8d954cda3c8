// DDP step time, 2 ranks on Gloo over loopback, 16-layer MLP of width 256 (32 parameter tensors).
// Variants, measured in interleaved rounds in one run:
//   compute  forward + backward + SGD step, no communication (lower bound)
//   naive    pytorch/examples dist-mnist: after backward, one blocking all-reduce per parameter,
//            then divide by the world size
//   flat     after backward, one all-reduce of all gradients flattened into one buffer
//   acc      acc::Accelerator DDP: bucketed all-reduces launched from gradient hooks (defaults:
//            a 1 MiB first bucket, then the rest of this 4 MiB model in one bucket)
//   acc_1b   the same with first_bucket_cap_mb = bucket_cap_mb: one all-reduce per step, started
//            when the last gradient is ready (what the small first bucket's overlap is worth)
// Prints median step times and the ratios acc/naive (target <= 0.3) and acc/flat (<= 1.05).
//
// Usage: acc_bench_ddp_step [steps]   (starts its own 2 ranks on loopback)
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include <acc/acc.h>

#include "mlp.h"
#include "timing.h"

#include "comm/process_group.h"
#include "spawn.h"

namespace {
using acc::bench::median;
using acc::bench::time_ms;

constexpr int kLayers = 16;
constexpr int kWidth = 256;
constexpr int kBatch = 64;

int run_rank(int steps) {
  acc::Accelerator accelerator;
  auto* group = accelerator.state().process_group();
  const int world = accelerator.num_processes();
  torch::manual_seed(0);
  auto x = torch::randn({kBatch, kWidth});

  struct Variant {
    torch::nn::Sequential model = acc::bench::make_tanh_mlp(kLayers, kWidth);
    std::unique_ptr<acc::Optimizer<torch::optim::SGD>> optimizer;
    std::function<void()> after_backward = [] {};
    std::vector<double> times;
  };
  std::map<std::string, Variant> variants;
  for (const char* name : {"compute", "naive", "flat", "acc", "acc_1b"}) {
    auto& v = variants[name];
    v.optimizer = std::make_unique<acc::Optimizer<torch::optim::SGD>>(v.model->parameters(), 1e-3);
  }
  accelerator.prepare(variants["acc"].model, *variants["acc"].optimizer);
  acc::Accelerator one_bucket(acc::AcceleratorOptions().ddp(
      acc::DistributedDataParallelKwargs().first_bucket_cap_mb(25.0)));
  one_bucket.prepare(variants["acc_1b"].model, *variants["acc_1b"].optimizer);

  auto& naive = variants["naive"];
  naive.after_backward = [&] {
    for (auto& p : naive.model->parameters()) {
      auto grad = p.grad();
      group->all_reduce_(grad, c10d::ReduceOp::SUM, "naive");
      grad.div_(world);
    }
  };
  auto& flat = variants["flat"];
  flat.after_backward = [&] {
    std::vector<torch::Tensor> grads;
    for (auto& p : flat.model->parameters()) grads.push_back(p.grad().reshape({-1}));
    auto buffer = torch::cat(grads);
    group->all_reduce_(buffer, c10d::ReduceOp::SUM, "flat");
    buffer.div_(world);
    int64_t offset = 0;
    for (auto& p : flat.model->parameters()) {
      p.grad().copy_(buffer.narrow(0, offset, p.numel()).view_as(p));
      offset += p.numel();
    }
  };

  auto step = [&](Variant& v) {
    accelerator.wait_for_everyone();  // start every timed step together
    auto start = std::chrono::steady_clock::now();
    v.optimizer->zero_grad();
    auto loss = v.model->forward(x).pow(2).mean();
    loss.backward();
    v.after_backward();
    v.optimizer->step();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  for (int warmup = 0; warmup < 5; ++warmup) {
    for (auto& [name, v] : variants) step(v);
  }
  for (int i = 0; i < steps; ++i) {  // interleaved so that machine noise hits every variant alike
    for (auto& [name, v] : variants) v.times.push_back(step(v));
  }

  if (accelerator.is_main_process()) {
    std::printf("DDP step, %d ranks (Gloo, loopback), MLP %d x %d (%zu parameter tensors), batch %d "
                "per rank, %d steps, median ms:\n",
                world, kLayers, kWidth, variants["acc"].model->parameters().size(), kBatch, steps);
    for (const char* name : {"compute", "naive", "flat", "acc", "acc_1b"}) {
      std::printf("  %-8s %8.2f ms\n", name, median(variants[name].times));
    }
    const double acc_ms = median(variants["acc"].times);
    const double vs_naive = acc_ms / median(variants["naive"].times);
    const double vs_flat = acc_ms / median(variants["flat"].times);
    std::printf("ratio acc/naive = %.3f (target <= 0.30) %s\n", vs_naive, vs_naive <= 0.30 ? "met" : "MISSED");
    std::printf("ratio acc/flat  = %.3f (target <= 1.05) %s\n", vs_flat, vs_flat <= 1.05 ? "met" : "MISSED");
    std::printf("ratio acc_1b/flat = %.3f (one bucket, no overlap)\n",
                median(variants["acc_1b"].times) / median(variants["flat"].times));
  }
  accelerator.end_training();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 60;
  if (std::getenv("RANK") != nullptr) return run_rank(steps);
  auto result = acc::testing::spawn_ranks("/proc/self/exe", {std::to_string(steps)}, 2,
                                          std::chrono::minutes(10));
  std::fputs(result.ranks[0].output.c_str(), stdout);
  if (!result.all_succeeded()) {
    std::fputs(result.describe().c_str(), stderr);
    return 1;
  }
  return 0;
}
