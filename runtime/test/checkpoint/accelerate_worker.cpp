// acc's side of test/parity/accelerate_checkpoint_parity.py: the same small regression as the
// Python side (weights from init.bin, batch k = rows (k mod 4)*8 .. +8 of data.bin), through
// checkpoints in Accelerate's layout.
//   save <sgd|adamw> <checkpoint> <data_dir> <N>
//       trains N steps from init.bin, save_state(checkpoint) with CheckpointFormat::Accelerate,
//       then prints "rand: ..." (three draws of the CPU generator right after the save)
//   resume <sgd|adamw> <checkpoint> <data_dir> <N> <M> <out>
//       builds the optimizer with other options than the run that saved (load_state must bring
//       them), load_state(checkpoint), prints "rand: ..." and "scheduler_step: k", trains steps
//       N .. N+M-1 and writes the weights (float32, in state-dict order) to out
// Exits 0 on success; prints "FAIL: ..." and exits 1 otherwise.
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <acc/acc.h>

#include "worker_checks.h"

namespace {

constexpr int64_t kFeatures = 4, kHidden = 8, kSamples = 32, kBatch = 8;

using acc::testing::fail;

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

torch::nn::Sequential make_model(const std::string& data_dir) {
  torch::nn::Sequential model(torch::nn::Linear(kFeatures, kHidden), torch::nn::Tanh(), torch::nn::Linear(kHidden, 1));
  const auto init = read_floats(data_dir + "/init.bin");
  size_t offset = 0;
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) {
    auto source = torch::from_blob(const_cast<float*>(init.data() + offset), p.sizes(), torch::kFloat);
    p.copy_(source);
    offset += p.numel();
  }
  if (offset != init.size()) fail("init.bin does not fit the model");
  return model;
}

struct Data {
  torch::Tensor x, y;
};
Data read_data(const std::string& data_dir) {
  auto flat = read_floats(data_dir + "/data.bin");
  auto all = torch::from_blob(flat.data(), {static_cast<int64_t>(flat.size())}, torch::kFloat).clone();
  return {all.narrow(0, 0, kSamples * kFeatures).view({kSamples, kFeatures}),
          all.narrow(0, kSamples * kFeatures, kSamples).view({kSamples, 1})};
}

void print_rand() {
  auto draws = torch::rand({3}, torch::kDouble);
  std::printf("rand: %.17g %.17g %.17g\n", draws[0].item<double>(), draws[1].item<double>(), draws[2].item<double>());
  std::fflush(stdout);
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& kind, torch::nn::Sequential& model,
                                                        bool resumed) {
  // A resumed run starts from other options: the checkpoint's must replace them.
  if (kind == "sgd") {
    return std::make_unique<acc::Optimizer<torch::optim::SGD>>(
        model->parameters(), torch::optim::SGDOptions(resumed ? 0.7 : 0.05).momentum(resumed ? 0.1 : 0.9)
                                 .weight_decay(resumed ? 0.0 : 1e-3));
  }
  if (kind == "adamw") {
    return std::make_unique<acc::Optimizer<torch::optim::AdamW>>(
        model->parameters(), torch::optim::AdamWOptions(resumed ? 0.7 : 0.01)
                                 .betas({resumed ? 0.5 : 0.9, resumed ? 0.5 : 0.99})
                                 .weight_decay(resumed ? 0.0 : 0.05));
  }
  fail("unknown optimizer " + kind);
}

void train(acc::Accelerator& accelerator, torch::nn::Sequential& model, torch::optim::Optimizer& optimizer,
           acc::Scheduler<torch::optim::StepLR>& scheduler, const Data& data, int64_t from, int64_t to) {
  for (int64_t step = from; step < to; ++step) {
    const int64_t start = (step % (kSamples / kBatch)) * kBatch;
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(data.x.narrow(0, start, kBatch)), data.y.narrow(0, start, kBatch));
    accelerator.backward(loss);
    optimizer.step();
    scheduler.step();
  }
}

void write_weights(torch::nn::Sequential& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& p : model->parameters()) {
    auto flat = p.detach().contiguous().to(torch::kFloat);
    out.write(static_cast<const char*>(flat.data_ptr()), flat.numel() * sizeof(float));
  }
  if (!out) fail("cannot write " + path);
}

int run(const std::vector<std::string>& args) {
  const bool save = args[0] == "save";
  const std::string kind = args[1], checkpoint = args[2], data_dir = args[3];
  const int64_t n = std::stoll(args[4]);
  auto config = acc::ProjectConfiguration();
  if (save) config.checkpoint_format(acc::CheckpointFormat::Accelerate);
  acc::Accelerator accelerator(acc::AcceleratorOptions().cpu(true).project_config(config));
  auto model = make_model(data_dir);
  auto optimizer = make_optimizer(kind, model, !save);
  // step_size 2 with gamma 1: the learning rate stays (libtorch's StepLR decays one call later
  // than PyTorch's), the step count crosses.
  acc::Scheduler<torch::optim::StepLR> scheduler(*optimizer, 2, 1.0);
  accelerator.prepare(model);
  if (kind == "sgd") {
    accelerator.prepare(static_cast<acc::Optimizer<torch::optim::SGD>&>(*optimizer));
  } else {
    accelerator.prepare(static_cast<acc::Optimizer<torch::optim::AdamW>&>(*optimizer));
  }
  accelerator.prepare(scheduler);
  const auto data = read_data(data_dir);
  if (save) {
    train(accelerator, model, *optimizer, scheduler, data, 0, n);
    accelerator.save_state(checkpoint);
    print_rand();
    return 0;
  }
  const int64_t m = std::stoll(args[5]);
  accelerator.load_state(checkpoint);
  print_rand();
  std::printf("scheduler_step: %u\n", acc::detail::LRSchedulerAccess::step_count(scheduler));
  std::fflush(stdout);
  train(accelerator, model, *optimizer, scheduler, data, n, n + m);
  write_weights(model, args[6]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!((args.size() == 5 && args[0] == "save") || (args.size() == 7 && args[0] == "resume"))) {
    std::cerr << "usage: acc_accelerate_checkpoint_worker save|resume ... (see the source)\n";
    return 2;
  }
  try {
    return run(args);
  } catch (const std::exception& error) {
    fail(error.what());
  }
}
