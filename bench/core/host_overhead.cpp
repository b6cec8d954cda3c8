// The host time acc adds to one training step (issue 38, item 5; aim: under 5 us per step), on a
// model so small (one Linear(8, 8), batch 1, on CPU) that a step is nearly all framework overhead.
// Each piece of acc's step is swapped into the same raw libtorch loop on its own and timed against
// that loop: (a) accelerator.backward, (b) a prepared optimizer's step() + zero_grad() (libtorch's
// loop and fused(true)), (c) the autocast guard of mixed precision (bf16 on CPU), (d) the whole
// step. Printed: the median over rounds of (variant - its baseline) in microseconds per step, each
// round's value being the median of its steps.
//
// Every variant lives on a thread of its own: autocast is thread-local state and a bf16
// Accelerator switches it on for the thread that prepared its model until end_training, which
// would otherwise leak into the raw loops. Rounds interleave the variants (in a rotating order)
// so machine noise hits all of them alike; the hand-over between threads is outside the timing.
//
// Usage: acc_bench_host_overhead [rounds] [steps per round]   (default 400 x 50)
#include <ATen/autocast_mode.h>
#include <ATen/Parallel.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <acc/accelerator.h>
#include <acc/autocast.h>
#include <acc/optimizer.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "timing.h"

namespace {

using acc::bench::median;
using Step = std::function<void()>;
using AccAdam = acc::Optimizer<torch::optim::Adam>;

constexpr int kWidth = 8;
constexpr double kAimUs = 5.0;

// The same weights and input in every variant, so they all do the same arithmetic.
torch::nn::Linear make_model() {
  torch::manual_seed(0);
  return torch::nn::Linear(kWidth, kWidth);
}
torch::Tensor make_input() { return torch::ones({1, kWidth}); }

acc::AcceleratorOptions accelerator_options(acc::MixedPrecision precision) {
  return acc::AcceleratorOptions().cpu(true).mixed_precision(precision);
}

// A check, not a measurement: a variant that silently ran in the wrong precision would make its
// difference meaningless.
void expect_dtype(const torch::Tensor& output, c10::ScalarType dtype, const char* variant) {
  if (output.scalar_type() != dtype) {
    std::fprintf(stderr, "acc_bench_host_overhead: variant '%s' computes in %s, expected %s\n", variant,
                 c10::toString(output.scalar_type()), c10::toString(dtype));
    std::exit(1);
  }
}

// --- the variants: each factory runs on its variant's thread and returns one training step ---

// Baseline: libtorch's own loop, fp32.
Step raw_step() {
  auto model = make_model();
  auto x = make_input();
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), 1e-4);
  expect_dtype(model->forward(x), c10::kFloat, "raw");
  return [=]() mutable {
    optimizer->zero_grad();
    model->forward(x).sum().backward();
    optimizer->step();
  };
}

// Baseline of the fused optimizer: the same ATen kernel through an unprepared acc::Optimizer (no
// Accelerator involved; libtorch itself has no fused step).
Step raw_fused_step() {
  auto model = make_model();
  auto x = make_input();
  auto optimizer = std::make_shared<AccAdam>(model->parameters(), 1e-4);
  optimizer->fused(true);
  return [=]() mutable {
    optimizer->zero_grad();
    model->forward(x).sum().backward();
    optimizer->step();
  };
}

// Baseline of mixed precision: what a libtorch user writes for torch.autocast by hand; the cache
// of bf16 weight copies must go each step, since the step changes the weights.
Step raw_bf16_step() {
  auto model = make_model();
  auto x = make_input();
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), 1e-4);
  at::autocast::set_autocast_dtype(c10::DeviceType::CPU, c10::kBFloat16);
  at::autocast::set_autocast_enabled(c10::DeviceType::CPU, true);
  expect_dtype(model->forward(x), c10::kBFloat16, "raw bf16");
  at::autocast::set_autocast_enabled(c10::DeviceType::CPU, false);
  at::autocast::clear_cache();
  return [=]() mutable {
    optimizer->zero_grad();
    at::autocast::set_autocast_enabled(c10::DeviceType::CPU, true);
    auto loss = model->forward(x).sum();
    at::autocast::set_autocast_enabled(c10::DeviceType::CPU, false);
    loss.backward();
    at::autocast::clear_cache();
    optimizer->step();
  };
}

// (a) accelerator.backward(loss) in place of loss.backward(); the model is prepared, the
// optimizer is libtorch's.
Step acc_backward_step() {
  auto accelerator = std::make_shared<acc::Accelerator>(accelerator_options(acc::MixedPrecision::NO));
  auto model = make_model();
  auto x = make_input();
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), 1e-4);
  accelerator->prepare(model, *optimizer);
  return [=]() mutable {
    optimizer->zero_grad();
    accelerator->backward(model->forward(x).sum());
    optimizer->step();
  };
}

// (b) a prepared acc::Optimizer's step() and zero_grad(), loss.backward() as in the raw loop.
Step acc_optimizer_step(bool fused) {
  auto accelerator = std::make_shared<acc::Accelerator>(accelerator_options(acc::MixedPrecision::NO));
  auto model = make_model();
  auto x = make_input();
  auto optimizer = std::make_shared<AccAdam>(model->parameters(), 1e-4);
  optimizer->fused(fused);
  accelerator->prepare(*optimizer);
  return [=]() mutable {
    optimizer->zero_grad();
    model->forward(x).sum().backward();
    optimizer->step();
  };
}

// (c) the guard accelerator.autocast() returns (an acc::AutocastGuard, bf16) around the forward;
// nothing prepared, so only the guard differs from the raw loops.
Step acc_autocast_step() {
  auto accelerator = std::make_shared<acc::Accelerator>(accelerator_options(acc::MixedPrecision::BF16));
  auto model = make_model();
  auto x = make_input();
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters(), 1e-4);
  {
    auto guard = accelerator->autocast();
    expect_dtype(model->forward(x), c10::kBFloat16, "accelerator.autocast()");
  }
  return [=]() mutable {
    optimizer->zero_grad();
    torch::Tensor loss;
    {
      auto guard = accelerator->autocast();
      loss = model->forward(x).sum();
    }
    loss.backward();
    optimizer->step();
  };
}

// (d) the whole acc step: prepared model and optimizer, accelerator.backward; under bf16 the
// forward runs in the autocast session that prepare() opened on this thread.
Step acc_whole_step(acc::MixedPrecision precision, bool fused) {
  auto accelerator = std::make_shared<acc::Accelerator>(accelerator_options(precision));
  auto model = make_model();
  auto x = make_input();
  auto optimizer = std::make_shared<AccAdam>(model->parameters(), 1e-4);
  optimizer->fused(fused);
  accelerator->prepare(model, *optimizer);
  const bool bf16 = precision == acc::MixedPrecision::BF16;
  expect_dtype(model->forward(x), bf16 ? c10::kBFloat16 : c10::kFloat, "whole acc step");
  return [=]() mutable {
    optimizer->zero_grad();
    accelerator->backward(model->forward(x).sum());
    optimizer->step();
  };
}

// One variant on its own thread: run(steps) times `steps` consecutive steps there, each on its
// own, and returns their median in microseconds (a step that the shared machine preempted does not
// count). Its state is built and destroyed on that thread.
class Runner {
 public:
  Runner(std::string name, std::function<Step()> factory) : name_(std::move(name)) {
    thread_ = std::thread([this, factory = std::move(factory)] {
      at::set_num_threads(1);
      Step step = factory();
      std::unique_lock<std::mutex> lock(mutex_);
      for (;;) {
        wake_.wait(lock, [&] { return pending_ > 0 || quit_; });
        if (quit_) break;
        times_.resize(pending_);
        for (auto& t : times_) {
          const auto start = std::chrono::steady_clock::now();
          step();
          t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        }
        result_us_ = median(times_);
        pending_ = 0;
        done_.notify_one();
      }
      step = nullptr;  // the Accelerator (and its autocast session) ends on its own thread
    });
  }
  ~Runner() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      quit_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  double run(int steps) {
    std::unique_lock<std::mutex> lock(mutex_);
    pending_ = steps;
    wake_.notify_one();
    done_.wait(lock, [&] { return pending_ == 0; });
    return result_us_;
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  int pending_ = 0;
  bool quit_ = false;
  double result_us_ = 0;
  std::vector<double> times_;
  std::thread thread_;
};

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * static_cast<double>(values.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 400;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 50;
  if (rounds < 1 || steps < 1) {
    std::fprintf(stderr, "usage: acc_bench_host_overhead [rounds >= 1] [steps per round >= 1]\n");
    return 2;
  }
  at::set_num_threads(1);  // one intra-op thread everywhere: the step is host overhead, not math

  enum { kRaw, kRawAgain, kRawFused, kRawBf16, kBackward, kOptLoop, kOptFused, kAutocast, kWholeFp32, kWholeFused,
         kWholeBf16, kCount };
  std::vector<std::unique_ptr<Runner>> runners(kCount);
  runners[kRaw] = std::make_unique<Runner>("raw libtorch loop, fp32", raw_step);
  runners[kRawAgain] = std::make_unique<Runner>("a second raw loop", raw_step);
  runners[kRawFused] = std::make_unique<Runner>("raw loop, unprepared fused Adam", raw_fused_step);
  runners[kRawBf16] = std::make_unique<Runner>("raw loop, hand-written bf16 autocast", raw_bf16_step);
  runners[kBackward] = std::make_unique<Runner>("accelerator.backward", acc_backward_step);
  runners[kOptLoop] = std::make_unique<Runner>("prepared Adam", [] { return acc_optimizer_step(false); });
  runners[kOptFused] = std::make_unique<Runner>("prepared Adam fused", [] { return acc_optimizer_step(true); });
  runners[kAutocast] = std::make_unique<Runner>("accelerator.autocast() guard", acc_autocast_step);
  runners[kWholeFp32] = std::make_unique<Runner>(
      "whole acc step, fp32", [] { return acc_whole_step(acc::MixedPrecision::NO, false); });
  runners[kWholeFused] = std::make_unique<Runner>(
      "whole acc step, fp32 fused", [] { return acc_whole_step(acc::MixedPrecision::NO, true); });
  runners[kWholeBf16] = std::make_unique<Runner>(
      "whole acc step, bf16", [] { return acc_whole_step(acc::MixedPrecision::BF16, false); });

  for (auto& runner : runners) runner->run(std::max(steps, 200));  // warm-up: Adam state, caches

  std::vector<std::vector<double>> us(kCount);
  for (int round = 0; round < rounds; ++round) {
    for (int k = 0; k < kCount; ++k) {
      const int v = (k + round) % kCount;  // rotate who goes first
      us[v].push_back(runners[v]->run(steps));
    }
  }

  // Median of the paired per-round differences, with their interquartile range as the spread.
  struct Diff {
    double median, q1, q3;
  };
  auto diff = [&](int variant, int baseline) {
    std::vector<double> d(rounds);
    for (int r = 0; r < rounds; ++r) d[r] = us[variant][r] - us[baseline][r];
    return Diff{median(d), quantile(d, 0.25), quantile(d, 0.75)};
  };

  std::printf("host overhead of acc on one Linear(%d, %d), batch 1, CPU, Adam, 1 intra-op thread; "
              "%d rounds x %d steps per variant, interleaved\n", kWidth, kWidth, rounds, steps);
  std::printf("median us/step:");
  for (int v = 0; v < kCount; ++v) std::printf("%s %s %.2f", v ? ";" : "", runners[v]->name().c_str(), median(us[v]));
  std::printf("\n\nacc minus baseline, us/step (median of per-round differences [q1, q3]):\n");
  auto line = [&](const char* label, int variant, int baseline) {
    const Diff d = diff(variant, baseline);
    std::printf("  %-62s %+7.2f  [%+.2f, %+.2f]  vs %s\n", label, d.median, d.q1, d.q3,
                runners[baseline]->name().c_str());
    return d.median;
  };
  line("(noise floor) a second raw loop vs the first", kRawAgain, kRaw);
  const double a = line("(a) accelerator.backward vs loss.backward", kBackward, kRaw);
  const double b_loop = line("(b) prepared Adam step+zero_grad, libtorch loop", kOptLoop, kRaw);
  const double b_fused = line("(b) prepared Adam step+zero_grad, fused(true)", kOptFused, kRawFused);
  line("    (not overhead) unprepared fused Adam vs libtorch's Adam", kRawFused, kRaw);
  const double c = line("(c) accelerator.autocast() guard vs hand-written autocast", kAutocast, kRawBf16);
  line("    (not overhead) hand-written bf16 autocast vs fp32", kRawBf16, kRaw);
  const double d_fp32 = line("(d) whole step, fp32, libtorch-loop Adam", kWholeFp32, kRaw);
  const double d_fused = line("(d) whole step, fp32, fused Adam", kWholeFused, kRawFused);
  const double d_bf16 = line("(d) whole step, bf16 autocast, libtorch-loop Adam", kWholeBf16, kRawBf16);

  std::printf("\nsum of the parts (a)+(b)+(c) = %+.2f us/step with libtorch's loop, %+.2f fused\n",
              a + b_loop + c, a + b_fused + c);
  const double worst = std::max({d_fp32, d_fused, d_bf16});
  std::printf("total (worst whole step) = %+.2f us/step: %s the %.0f us aim\n", worst,
              worst < kAimUs ? "under" : "OVER", kAimUs);
  return 0;
}
