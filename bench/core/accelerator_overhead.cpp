// Overhead of acc::Accelerator on one process against the same raw libtorch loop (target: at most
// 3%). Both loops train identical MLPs; steps are interleaved so machine noise hits both alike.
//
// Usage: acc_bench_overhead [steps]
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <acc/acc.h>

#include "timing.h"

namespace {
using acc::bench::median;
using acc::bench::time_ms;
torch::nn::Sequential make_mlp() {
  torch::nn::Sequential model;
  for (int i = 0; i < 8; ++i) {
    model->push_back(torch::nn::Linear(256, 256));
    model->push_back(torch::nn::ReLU());
  }
  return model;
}


}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 300;
  torch::manual_seed(0);
  auto x = torch::randn({128, 256});

  auto raw_model = make_mlp();
  torch::optim::Adam raw_optimizer(raw_model->parameters(), 1e-4);

  acc::Accelerator accelerator;
  auto acc_model = make_mlp();
  acc::Optimizer<torch::optim::Adam> acc_optimizer(acc_model->parameters(), 1e-4);
  accelerator.prepare(acc_model, acc_optimizer);

  auto raw_step = [&] {
    raw_optimizer.zero_grad();
    raw_model->forward(x).pow(2).mean().backward();
    raw_optimizer.step();
  };
  auto acc_step = [&] {
    acc_optimizer.zero_grad();
    accelerator.backward(acc_model->forward(x).pow(2).mean());
    acc_optimizer.step();
  };
  for (int i = 0; i < 20; ++i) {
    raw_step();
    acc_step();
  }
  std::vector<double> raw, with_acc;
  for (int i = 0; i < steps; ++i) {
    raw.push_back(time_ms(raw_step));
    with_acc.push_back(time_ms(acc_step));
  }
  const double ratio = median(with_acc) / median(raw);
  std::printf("one process, MLP 8 x 256, batch 128, Adam, %d steps, median: raw libtorch %.3f ms, "
              "acc %.3f ms\n", steps, median(raw), median(with_acc));
  std::printf("ratio acc/raw = %.3f (target <= 1.03) %s\n", ratio, ratio <= 1.03 ? "met" : "MISSED");
  return 0;
}
