// One process on the accelerator's device (a GPU where there is one), a model trained with mixed
// precision through acc: the C++ side of scripts/device-check's comparison with Python
// (device_step.py builds the same models, sizes and loop). Prints
//   RESULT <ms per step> <first loss> <last loss> <device>
// and with --sync-check, after the timed steps, one line for 10 more steady steps run under CUDA's
// sync debug mode (a call that makes the host wait for the device throws there):
//   SYNC-FREE <case>: ...   |   SYNC <case>: <the call>   |   SKIP <case>: <why>
//
// Usage: acc_bench_device_step [--model lm|cnn] [--fused] [--accumulate N] [--clip] [--sync-check]
//                              [bf16|fp16|no] [steps] [lm: dim blocks batch seq | cnn: batch]
// (--fused: acc::Optimizer::fused(true), ATen's fused AdamW kernel; without it libtorch's loop;
//  --accumulate N: gradient_accumulation_steps(N); --clip: clip_grad_norm_(1.0) before each step)
#include <c10/util/Exception.h>
#include <torch/cuda.h>
#include <torch/optim/adamw.h>

#if defined(ACC_BENCH_SYNC_CHECK)
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <acc/acc.h>

#include "step_models.h"

namespace {

using acc::bench::kVocab;

struct Args {
  std::string model = "lm";
  bool fused = false;
  bool clip = false;
  bool sync_check = false;
  int accumulate = 1;
  std::string precision = "bf16";
  int steps = 20;
  std::vector<int64_t> sizes;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "acc_bench_device_step: %s\nusage: acc_bench_device_step [--model lm|cnn] [--fused] [--accumulate N] "
               "[--clip] [--sync-check] [bf16|fp16|no] [steps] [lm: dim blocks batch seq | cnn: batch]\n",
               problem.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args args;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--fused") {
      args.fused = true;
    } else if (arg == "--clip") {
      args.clip = true;
    } else if (arg == "--sync-check") {
      args.sync_check = true;
    } else if (arg == "--model" || arg == "--accumulate") {
      if (i + 1 >= argc) usage(arg + " needs a value");
      const std::string value = argv[++i];
      if (arg == "--model") {
        args.model = value;
      } else {
        args.accumulate = std::atoi(value.c_str());
      }
    } else if (arg.rfind("--", 0) == 0) {
      usage("unknown flag " + arg);
    } else {
      positional.push_back(arg);
    }
  }
  if (args.model != "lm" && args.model != "cnn") usage("--model is lm or cnn, not '" + args.model + "'");
  if (args.accumulate < 1) usage("--accumulate takes a count of at least 1");
  if (!positional.empty()) args.precision = positional[0];
  if (positional.size() > 1) args.steps = std::atoi(positional[1].c_str());
  for (size_t i = 2; i < positional.size(); ++i) args.sizes.push_back(std::atoll(positional[i].c_str()));
  return args;
}

acc::MixedPrecision precision_named(const std::string& name) {
  if (name == "bf16") return acc::MixedPrecision::BF16;
  if (name == "fp16") return acc::MixedPrecision::FP16;
  if (name == "no") return acc::MixedPrecision::NO;
  usage("precision must be bf16, fp16 or no, not '" + name + "'");
}

int64_t size_or(const Args& args, size_t i, int64_t fallback) { return i < args.sizes.size() ? args.sizes[i] : fallback; }

// What the host waits for in `steps` calls of `step`, under CUDA's sync debug mode: empty when
// nothing synchronised, else the first synchronising call's message.
std::string first_synchronising_call(int steps, const std::function<void()>& step) {
#if defined(ACC_BENCH_SYNC_CHECK)
  auto& warnings = c10::cuda::warning_state();
  warnings.set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
  std::string found;
  try {
    for (int i = 0; i < steps; ++i) step();
  } catch (const c10::Error& error) {
    found = error.what_without_backtrace();
    std::fprintf(stderr, "the synchronising call:\n%s\n", error.what());
  }
  warnings.set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
  return found;
#else
  (void)steps;
  (void)step;
  return "this build has no c10_cuda (CPU-only libtorch)";
#endif
}

template <typename Model>
int run(const Args& args, Model model, const torch::Tensor& inputs, const torch::Tensor& targets,
        acc::Accelerator& accelerator) {
  const auto device = accelerator.device();
  acc::Optimizer<torch::optim::AdamW> optimizer(model->parameters(), torch::optim::AdamWOptions(1e-4));
  optimizer.fused(args.fused);
  accelerator.prepare(model, optimizer);
  auto loss_of = [&] {
    auto out = model->forward(inputs);
    return torch::nn::functional::cross_entropy(out.reshape({-1, out.size(-1)}).to(torch::kFloat), targets);
  };
  auto step = [&] {
    auto accumulate = accelerator.accumulate(model);
    optimizer.zero_grad();
    torch::Tensor loss;
    {
      auto autocast = accelerator.autocast();
      loss = loss_of();
    }
    accelerator.backward(loss);
    if (args.clip && accelerator.sync_gradients()) accelerator.clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();
    return loss;
  };
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  double first = 0;
  std::chrono::steady_clock::time_point start;
  for (int i = 0; i < args.steps + 3; ++i) {  // 3 warm-up steps
    if (i == 3) {
      sync();
      start = std::chrono::steady_clock::now();
    }
    auto loss = step();
    if (i == 0) first = loss.template item<double>();
  }
  sync();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / args.steps;
  // Read after the timing: item() synchronises, which would serialise the timed steps.
  double last = 0;
  {
    torch::NoGradGuard no_grad;
    auto autocast = accelerator.autocast();
    last = loss_of().template item<double>();
  }
  std::printf("RESULT %.3f %.4f %.4f %s\n", ms, first, last, device.str().c_str());
  if (args.sync_check) {
    std::string label = args.model + " " + args.precision + (args.fused ? " fused" : " loop") +
                        (args.accumulate > 1 ? " accumulate" + std::to_string(args.accumulate) : "") +
                        (args.clip ? " clip" : "");
    if (!device.is_cuda()) {
      std::printf("SKIP %s: no CUDA device here\n", label.c_str());
    } else {
      const auto call = first_synchronising_call(10 * args.accumulate, [&] { step(); });
      if (call.empty()) {
        std::printf("SYNC-FREE %s: %d steady steps, no call waited for the device\n", label.c_str(), 10);
      } else {
        std::printf("SYNC %s: %s\n", label.c_str(), call.substr(0, call.find('\n')).c_str());
      }
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = parse(argc, argv);
  acc::Accelerator accelerator(acc::AcceleratorOptions()
                                   .mixed_precision(precision_named(args.precision))
                                   .gradient_accumulation_steps(args.accumulate));
  const auto device = accelerator.device();
  torch::manual_seed(0);
  if (args.model == "lm") {
    const int64_t dim = size_or(args, 0, 1024), blocks = size_or(args, 1, 16);
    const int64_t batch = size_or(args, 2, 8), seq = size_or(args, 3, 512);
    acc::bench::Lm model(dim, blocks);
    // The same batch every step: the loss must fall, which checks the step did something.
    auto tokens = torch::randint(kVocab, {batch, seq + 1}, torch::TensorOptions().dtype(torch::kLong).device(device));
    return run(args, model, tokens.narrow(1, 0, seq), tokens.narrow(1, 1, seq).reshape({-1}), accelerator);
  }
  const int64_t batch = size_or(args, 0, 256);
  acc::bench::Cnn model;
  auto images = torch::randn({batch, 3, 32, 32}, torch::TensorOptions().device(device));
  auto labels = torch::randint(10, {batch}, torch::TensorOptions().dtype(torch::kLong).device(device));
  return run(args, model, images, labels, accelerator);
}
