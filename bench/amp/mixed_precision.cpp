// bf16 autocast against fp32 step time on CPU for a matmul-heavy MLP, and the cost of one
// accumulation micro-step (accumulate() + backward with the loss division, no optimizer step)
// against a plain backward. Both in one run, interleaved; prints ratios.
//
// Usage: acc_bench_mixed_precision [steps]
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
  for (int i = 0; i < 4; ++i) {
    model->push_back(torch::nn::Linear(1024, 1024));
    model->push_back(torch::nn::ReLU());
  }
  return model;
}


}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  torch::manual_seed(0);
  auto x = torch::randn({256, 1024});

  // Autocast is thread-local and switched on by prepare(), so each precision gets its own thread
  // of work: fp32 here, bf16 inside a guard the bf16 Accelerator controls.
  acc::Accelerator fp32(acc::AcceleratorOptions().mixed_precision(acc::MixedPrecision::NO));
  auto model32 = make_mlp();
  acc::Optimizer<torch::optim::Adam> opt32(model32->parameters(), 1e-4);
  fp32.prepare(model32, opt32);
  auto step32 = [&] {
    opt32.zero_grad();
    fp32.backward(model32->forward(x).pow(2).mean());
    opt32.step();
  };

  acc::Accelerator bf16(acc::AcceleratorOptions().mixed_precision(acc::MixedPrecision::BF16));
  auto model16 = make_mlp();
  acc::Optimizer<torch::optim::Adam> opt16(model16->parameters(), 1e-4);
  bf16.prepare(model16, opt16);  // autocast on from here, on this thread
  auto step16 = [&] {
    opt16.zero_grad();
    bf16.backward(model16->forward(x).pow(2).mean());
    opt16.step();
  };
  auto fp32_outside_autocast = [&] {
    auto off = bf16.autocast(false);
    step32();
  };

  std::vector<double> t32, t16;
  for (int i = 0; i < 3; ++i) {
    fp32_outside_autocast();
    step16();
  }
  for (int i = 0; i < steps; ++i) {
    t32.push_back(time_ms(fp32_outside_autocast));
    t16.push_back(time_ms(step16));
  }
  std::printf("MLP 4 x 1024, batch 256, Adam, %d steps, median: fp32 %.2f ms, bf16 autocast %.2f ms\n",
              steps, median(t32), median(t16));
  std::printf("ratio bf16/fp32 = %.3f (CPU bf16 speed depends on the CPU's bf16 support)\n",
              median(t16) / median(t32));
  bf16.end_training();

  acc::Accelerator accumulating(acc::AcceleratorOptions().gradient_accumulation_steps(1000000));
  auto model_a = make_mlp();
  acc::Optimizer<torch::optim::Adam> opt_a(model_a->parameters(), 1e-4);
  accumulating.prepare(model_a, opt_a);
  auto plain = make_mlp();
  auto micro_step = [&] {
    auto guard = accumulating.accumulate(model_a);
    accumulating.backward(model_a->forward(x).pow(2).mean());
    opt_a.step();  // skipped: not a sync step
  };
  auto plain_backward = [&] { plain->forward(x).pow(2).mean().backward(); };
  std::vector<double> ta, tp;
  for (int i = 0; i < steps; ++i) {
    tp.push_back(time_ms(plain_backward));
    ta.push_back(time_ms(micro_step));
  }
  std::printf("accumulation micro-step %.2f ms vs plain backward %.2f ms: ratio %.3f\n", median(ta),
              median(tp), median(ta) / median(tp));
  return 0;
}
