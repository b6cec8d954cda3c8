// DDP step time, 2 ranks on Gloo over loopback. Variants, measured in interleaved rounds in one run:
//   compute    forward + backward + SGD step, no communication (lower bound)
//   naive      pytorch/examples dist-mnist: after backward, one blocking all-reduce per parameter,
//              then divide by the world size
//   flat       after backward, one all-reduce of all gradients flattened into one buffer
//   acc        acc::Accelerator DDP: bucketed all-reduces launched from gradient hooks (defaults:
//              a 1 MiB first bucket, then 25 MiB buckets)
//   acc_1b     the same with first_bucket_cap_mb = bucket_cap_mb (what the small first bucket's
//              overlap is worth)
//   no_overlap (big) acc's arithmetic without overlap: after backward, each gradient multiplied by
//              1/world and all-reduced where it lies (what overlapping backward is worth)
// and, timed alone in the same rounds, the communication of one step:
//   allreduce  one Gloo all-reduce of a buffer of all gradient bytes
//   ring       the same sum through acc's send/recv ring (reduce-scatter, then all-gather), which
//              FSDP uses on CPU
//
// Two models:
//   small (default)  16 Linear(256, 256) (4 MiB of gradients): acc/naive (target <= 0.3) and
//                    acc/flat (target <= 1.05)
//   big              12 Linear(2048, 2048) (50.4M parameters, 201 MB of gradients): acc/(compute +
//                    allreduce) (target <= 1.05) and ring/allreduce (which should carry DDP's buckets)
//
// A synchronous step ends when its slowest rank does, so each round's timing is the maximum over the
// ranks (rank 0's own compute time would understate the limit). The big model's verdict is read on
// the ratio round by round, whose median pairs each step with the baseline measured beside it; the
// ratio of medians is printed too.
//
// Scheduling changes the baseline on a small machine: under `chrt -f` (SCHED_FIFO) Gloo's threads run
// only when a rank's compute thread blocks (they cannot preempt it at the same priority), and an
// all-reduce alone is faster than under the default scheduler, where threads share the cores.
//
// Usage: acc_bench_ddp_step [steps] [small|big]   (starts its own 2 ranks on loopback)
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
#include <string>
#include <vector>

#include <acc/acc.h>

#include "mlp.h"
#include "timing.h"

#include "comm/process_group.h"
#include "spawn.h"

namespace {
using acc::bench::median;
using acc::bench::time_ms;

constexpr int kBatch = 64;

int run_rank(int steps, bool big) {
  const int layers = big ? 12 : 16, width = big ? 2048 : 256;
  acc::Accelerator accelerator;
  auto* group = accelerator.state().process_group();
  const int world = accelerator.num_processes();
  torch::manual_seed(0);
  auto x = torch::randn({kBatch, width});

  struct Variant {
    torch::nn::Sequential model;
    std::unique_ptr<acc::Optimizer<torch::optim::SGD>> optimizer;
    std::function<void()> after_backward = [] {};
    std::vector<double> times;
  };
  std::map<std::string, Variant> variants;
  const std::vector<std::string> names =
      big ? std::vector<std::string>{"compute", "flat", "acc", "acc_1b", "no_overlap"}
          : std::vector<std::string>{"compute", "naive", "flat", "acc", "acc_1b"};
  for (const auto& name : names) {
    auto& v = variants[name];
    v.model = acc::bench::make_tanh_mlp(layers, width);
    v.optimizer = std::make_unique<acc::Optimizer<torch::optim::SGD>>(v.model->parameters(), 1e-3);
  }
  accelerator.prepare(variants["acc"].model, *variants["acc"].optimizer);
  acc::Accelerator one_bucket(acc::AcceleratorOptions().ddp(
      acc::DistributedDataParallelKwargs().first_bucket_cap_mb(25.0)));
  one_bucket.prepare(variants["acc_1b"].model, *variants["acc_1b"].optimizer);

  int64_t numel = 0;
  for (auto& p : variants["compute"].model->parameters()) numel += p.numel();
  auto gradients = torch::randn({numel});  // one step's gradient bytes, for the comm-only timings
  // Every timed piece starts on all ranks together.
  auto timed = [&](const std::function<void()>& body) {
    accelerator.wait_for_everyone();
    auto start = std::chrono::steady_clock::now();
    body();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  std::map<std::string, std::function<void()>> comm{
      {"allreduce", [&] { group->all_reduce_(gradients, c10d::ReduceOp::SUM, "allreduce"); }},
      {"ring", [&] {
         // In place: this rank's chunk of the sum lands in its own chunk, then goes round.
         const int64_t chunk = numel / world;  // both models' sizes divide by 2
         group->reduce_scatter_flat(gradients.narrow(0, group->rank() * chunk, chunk), gradients);
         group->wait(group->all_gather_flat(gradients), "ring all-reduce", std::chrono::minutes(1));
       }}};
  std::map<std::string, std::vector<double>> comm_times;

  if (!big) variants["naive"].after_backward = [&, &naive = variants["naive"]] {
    for (auto& p : naive.model->parameters()) {
      auto grad = p.grad();
      group->all_reduce_(grad, c10d::ReduceOp::SUM, "naive");
      grad.div_(world);
    }
  };
  if (big) variants["no_overlap"].after_backward = [&, &v = variants["no_overlap"]] {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (auto& p : v.model->parameters()) {
      std::vector<at::Tensor> grad{p.grad().mul_(1.0 / world)};
      works.push_back(group->backend_for(grad.front()).allreduce(grad));
    }
    for (auto& work : works) group->wait(work, "no_overlap", std::chrono::minutes(1));
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
    return timed([&] {
      v.optimizer->zero_grad();
      v.model->forward(x).pow(2).mean().backward();
      v.after_backward();
      v.optimizer->step();
    });
  };
  for (int warmup = 0; warmup < (big ? 2 : 5); ++warmup) {
    for (const auto& name : names) step(variants[name]);
    for (auto& [name, body] : comm) timed(body);
  }
  for (int i = 0; i < steps; ++i) {  // interleaved so that machine noise hits every variant alike
    for (const auto& name : names) variants[name].times.push_back(step(variants[name]));
    for (auto& [name, body] : comm) comm_times[name].push_back(timed(body));
  }

  auto slowest_rank = [&](std::vector<double>& times) {
    auto t = torch::tensor(times, torch::kDouble);
    group->all_reduce_(t, c10d::ReduceOp::MAX, "bench timings");
    times.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
  };
  for (const auto& name : names) slowest_rank(variants[name].times);
  for (auto& [name, times] : comm_times) slowest_rank(times);

  if (accelerator.is_main_process()) {
    std::printf("DDP step, %d ranks (Gloo, loopback), MLP %d x %d (%.1fM parameters, %zu tensors), batch %d "
                "per rank, %d steps, median ms:\n",
                world, layers, width, numel / 1e6, variants["acc"].model->parameters().size(), kBatch, steps);
    for (const auto& name : names) std::printf("  %-9s %8.2f ms\n", name.c_str(), median(variants[name].times));
    for (const auto& [name, times] : comm_times) {
      std::printf("  %-9s %8.2f ms (communication alone, %.0f MB)\n", name.c_str(), median(times),
                  numel * 4 / 1e6);
    }
    const double acc_ms = median(variants["acc"].times);
    const double vs_flat = acc_ms / median(variants["flat"].times);
    if (big) {
      // Round by round, each step against the baseline measured beside it; the quartiles are the
      // machine's noise.
      std::vector<double> per_round;
      for (size_t i = 0; i < variants["acc"].times.size(); ++i) {
        per_round.push_back(variants["acc"].times[i] / (variants["compute"].times[i] + comm_times["allreduce"][i]));
      }
      std::sort(per_round.begin(), per_round.end());
      const double vs_limit = median(per_round);
      std::printf("ratio acc/(compute + allreduce) = %.3f (median of %zu rounds, quartiles %.3f-%.3f; "
                  "target <= 1.05) %s\n",
                  vs_limit, per_round.size(), per_round[per_round.size() / 4], per_round[per_round.size() * 3 / 4],
                  vs_limit <= 1.05 ? "met" : "MISSED");
      std::printf("  ratio of medians %.3f\n",
                  acc_ms / (median(variants["compute"].times) + median(comm_times["allreduce"])));
      std::printf("ratio acc/no_overlap = %.3f (below 1: overlapping backward pays)\n",
                  acc_ms / median(variants["no_overlap"].times));
      std::printf("ratio ring/allreduce = %.3f (below 1: the ring is the faster way to sum %.0f MB)\n",
                  median(comm_times["ring"]) / median(comm_times["allreduce"]), numel * 4 / 1e6);
    } else {
      const double vs_naive = acc_ms / median(variants["naive"].times);
      std::printf("ratio acc/naive = %.3f (target <= 0.30) %s\n", vs_naive, vs_naive <= 0.30 ? "met" : "MISSED");
    }
    std::printf("ratio acc/flat  = %.3f (target <= 1.05) %s\n", vs_flat, vs_flat <= 1.05 ? "met" : "MISSED");
    std::printf("ratio acc_1b/flat = %.3f (one bucket, no overlap)\n",
                median(variants["acc_1b"].times) / median(variants["flat"].times));
  }
  accelerator.end_training();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool big = argc > 2 && std::string(argv[2]) == "big";
  const int steps = argc > 1 ? std::atoi(argv[1]) : (big ? 10 : 60);
  if (argc > 2 && !big && std::string(argv[2]) != "small") {
    std::fprintf(stderr, "usage: acc_bench_ddp_step [steps] [small|big]\n");
    return 2;
  }
  if (std::getenv("RANK") != nullptr) return run_rank(steps, big);
  auto result = acc::testing::spawn_ranks("/proc/self/exe", {std::to_string(steps), big ? "big" : "small"}, 2,
                                          std::chrono::minutes(10));
  std::fputs(result.ranks[0].output.c_str(), stdout);
  if (!result.all_succeeded()) {
    std::fputs(result.describe().c_str(), stderr);
    return 1;
  }
  return 0;
}
