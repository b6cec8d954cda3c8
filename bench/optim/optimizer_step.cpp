// Optimizer step time on 50M parameters (12 layers of 2048 x 2048 plus biases), one process on the
// CPU: acc::Optimizer::fused(true) against libtorch's own loop (target: at least 2x faster), and
// against Python torch.optim with fused=True and with its CPU default loop, measured in the same run
// on the same shapes. AdamW (weight decay) and SGD (momentum). Gradients are fixed random tensors:
// this times the update alone.
//
// Usage: acc_bench_optimizer_step [steps]   (default 10; the median step is printed)
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <acc/acc.h>

#include "timing.h"

#ifndef ACC_PYTHON
#define ACC_PYTHON "python3"
#endif
#ifndef ACC_OPTIMIZER_STEP_PY
#define ACC_OPTIMIZER_STEP_PY "bench/optim/optimizer_step.py"
#endif

namespace {

constexpr int64_t kWidth = 2048, kLayers = 12;

std::vector<torch::Tensor> parameters_with_gradients() {
  torch::manual_seed(0);
  std::vector<torch::Tensor> params;
  for (int64_t i = 0; i < kLayers; ++i) {
    for (auto shape : {std::vector<int64_t>{kWidth, kWidth}, std::vector<int64_t>{kWidth}}) {
      auto p = torch::randn(shape).requires_grad_(true);
      p.mutable_grad() = torch::randn_like(p);
      params.push_back(p);
    }
  }
  return params;
}

template <typename Opt, typename Options>
double median_step_ms(const Options& options, bool fused, int steps) {
  auto params = parameters_with_gradients();
  acc::Optimizer<Opt> optimizer(params, options);
  optimizer.fused(fused);
  std::vector<double> times;
  for (int i = 0; i < steps + 1; ++i) {  // one warm-up step (state allocation)
    const double ms = acc::bench::time_ms([&] { optimizer.step(); });
    if (i > 0) times.push_back(ms);
  }
  return acc::bench::median(times);
}

// "AdamW loop" -> ms, from optimizer_step.py's RESULT lines.
std::map<std::string, double> python_times(int steps) {
  const std::string command = std::string(ACC_PYTHON) + " " + ACC_OPTIMIZER_STEP_PY + " " + std::to_string(steps) +
                              " " + std::to_string(kWidth) + " " + std::to_string(kLayers);
  std::map<std::string, double> out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char line[256];
  while (std::fgets(line, sizeof line, pipe) != nullptr) {
    std::istringstream in(line);
    std::string tag, name, path;
    double ms = 0;
    if (in >> tag >> name >> path >> ms && tag == "RESULT") out[name + " " + path] = ms;
  }
  ::pclose(pipe);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  const double params_m = kLayers * (kWidth * kWidth + kWidth) / 1e6;
  std::printf("Optimizer step on %.1fM fp32 parameters (%lld tensors), one CPU process, median of %d steps:\n",
              params_m, static_cast<long long>(2 * kLayers), steps);
  struct Row {
    std::string name;
    double loop, fused;
  };
  std::vector<Row> rows{
      {"AdamW", median_step_ms<torch::optim::AdamW>(torch::optim::AdamWOptions(1e-3).weight_decay(0.01), false, steps),
       median_step_ms<torch::optim::AdamW>(torch::optim::AdamWOptions(1e-3).weight_decay(0.01), true, steps)},
      {"SGD", median_step_ms<torch::optim::SGD>(torch::optim::SGDOptions(1e-2).momentum(0.9), false, steps),
       median_step_ms<torch::optim::SGD>(torch::optim::SGDOptions(1e-2).momentum(0.9), true, steps)}};
  const auto python = python_times(steps);
  for (const auto& row : rows) {
    const double speedup = row.loop / row.fused;
    std::printf("  %-6s libtorch loop %8.1f ms  acc fused %8.1f ms  fused speed-up %.2fx (target >= 2) %s\n",
                row.name.c_str(), row.loop, row.fused, speedup, speedup >= 2 ? "met" : "MISSED");
    const auto py_loop = python.find(row.name + " loop"), py_fused = python.find(row.name + " fused");
    if (py_loop == python.end() || py_fused == python.end()) {
      std::printf("         Python torch.optim: not measured (%s %s failed)\n", ACC_PYTHON, ACC_OPTIMIZER_STEP_PY);
      continue;
    }
    std::printf("         Python loop %8.1f ms  Python fused %8.1f ms  acc fused / Python fused = %.2f\n",
                py_loop->second, py_fused->second, row.fused / py_fused->second);
  }
  return 0;
}
