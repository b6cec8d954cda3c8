// The flat collectives of FSDP on CPU: acc's send/recv rings (ProcessGroup::reduce_scatter_flat,
// all_gather_flat) against Gloo's own _reduce_scatter_base and _allgather_base, with Gloo's
// all-reduce of the same bytes as the baseline. 50M floats in units of 25 MiB (FSDP's default
// bucket), every unit launched before the first is waited for, as FSDP does. Rounds alternate
// the variants; each prints the median of its rounds, on rank 0.
//
// Usage: acc_bench_fsdp_collectives [rounds [ranks...]]   (default: 5 rounds on 2 and 4 ranks)
#include <ATen/ops/empty.h>
#include <ATen/ops/randn.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <acc/acc.h>

#include "comm/process_group.h"
#include "spawn.h"
#include "timing.h"

namespace {
using acc::bench::median;
using acc::bench::time_ms;

constexpr int64_t kElements = 50'000'000;
constexpr int64_t kUnitElements = 25 * 1024 * 1024 / 4;

int run_rank(int rounds) {
  acc::Accelerator accelerator;
  auto& group = *accelerator.state().process_group();
  const int world = group.size();
  // Units padded to a multiple of the ranks, as FSDP's flat parameters are.
  std::vector<at::Tensor> units;
  for (int64_t left = kElements; left > 0; left -= kUnitElements) {
    const int64_t n = std::min(left, kUnitElements);
    units.push_back(at::randn({(n + world - 1) / world * world}));
  }
  std::vector<at::Tensor> shards;
  for (const auto& unit : units) shards.push_back(at::empty({unit.numel() / world}));
  auto wait_all = [&](std::vector<c10::intrusive_ptr<c10d::Work>> works) {
    for (auto& work : works) group.wait(work, "bench", std::chrono::minutes(5));
  };
  auto& gloo = group.backend_for(units[0]);
  const std::map<std::string, std::function<void()>> variants{
      {"all-reduce (Gloo)",
       [&] {
         std::vector<c10::intrusive_ptr<c10d::Work>> works;
         for (auto& unit : units) {
           std::vector<at::Tensor> tensors{unit};
           works.push_back(gloo.allreduce(tensors));
         }
         wait_all(std::move(works));
       }},
      {"reduce-scatter (Gloo)",
       [&] {
         std::vector<c10::intrusive_ptr<c10d::Work>> works;
         for (size_t u = 0; u < units.size(); ++u) works.push_back(gloo._reduce_scatter_base(shards[u], units[u]));
         wait_all(std::move(works));
       }},
      {"reduce-scatter (acc ring)",
       [&] {
         std::vector<c10::intrusive_ptr<c10d::Work>> works;
         for (size_t u = 0; u < units.size(); ++u) works.push_back(group.reduce_scatter_flat(shards[u], units[u]));
         wait_all(std::move(works));
       }},
      {"all-gather (Gloo)",
       [&] {
         std::vector<c10::intrusive_ptr<c10d::Work>> works;
         for (size_t u = 0; u < units.size(); ++u) {
           auto input = units[u].chunk(world)[group.rank()].clone();
           works.push_back(gloo._allgather_base(units[u], input));
         }
         wait_all(std::move(works));
       }},
      {"all-gather (acc ring)",
       [&] {
         std::vector<c10::intrusive_ptr<c10d::Work>> works;
         for (auto& unit : units) works.push_back(group.all_gather_flat(unit));
         wait_all(std::move(works));
       }},
  };
  std::map<std::string, std::vector<double>> times;
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up
    for (const auto& [name, run] : variants) {
      group.barrier("bench");
      const double ms = time_ms(run);
      if (round > 0) times[name].push_back(ms);
    }
  }
  for (const auto& [name, t] : times) std::printf("RESULT %s=%.1f\n", name.c_str(), median(t));
  accelerator.end_training();
  return 0;
}

std::map<std::string, double> measure(int ranks, int rounds) {
  auto result = acc::testing::spawn_ranks("/proc/self/exe", {std::to_string(rounds)}, ranks,
                                          std::chrono::minutes(10));
  if (!result.all_succeeded()) {
    std::fputs(result.describe().c_str(), stderr);
    std::exit(1);
  }
  std::map<std::string, double> ms;
  std::istringstream lines(result.ranks[0].output);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    const auto eq = line.rfind('=');
    ms[line.substr(7, eq - 7)] = std::stod(line.substr(eq + 1));
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("RANK") != nullptr && argc > 1) return run_rank(std::atoi(argv[1]));
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  std::vector<int> rank_counts;
  for (int i = 2; i < argc; ++i) rank_counts.push_back(std::atoi(argv[i]));
  if (rank_counts.empty()) rank_counts = {2, 4};
  std::printf("FSDP's flat collectives on CPU, Gloo over loopback, %.0fM floats in units of 25 MiB, "
              "median of %d rounds, rank 0:\n", kElements / 1e6, rounds);
  for (int ranks : rank_counts) {
    auto ms = measure(ranks, rounds);
    std::printf("%d ranks:\n", ranks);
    for (const auto& [name, t] : ms) std::printf("  %-26s %8.1f ms\n", name.c_str(), t);
    std::printf("  ratio reduce-scatter acc/Gloo = %.3f\n",
                ms["reduce-scatter (acc ring)"] / ms["reduce-scatter (Gloo)"]);
    std::printf("  ratio all-gather     acc/Gloo = %.3f\n",
                ms["all-gather (acc ring)"] / ms["all-gather (Gloo)"]);
    std::printf("  ratio (acc reduce-scatter + all-gather) / Gloo all-reduce = %.3f\n",
                (ms["reduce-scatter (acc ring)"] + ms["all-gather (acc ring)"]) / ms["all-reduce (Gloo)"]);
  }
  return 0;
}
