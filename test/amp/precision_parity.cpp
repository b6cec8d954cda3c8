// acc's side of test/parity/precision_parity.py: the MLP regression of that script, trained from
// the weights and data it wrote, in one of two modes:
//   accumulate  gradient_accumulation_steps 4, LambdaLR 0.9^step as acc::Scheduler
//   bf16        mixed_precision bf16 (CPU autocast)
// Each rank writes "loss lr" per batch, the dtypes it saw, and rank 0 the final weights.
//   usage: acc_precision_parity DIR MODE          (run by torchrun for 2 processes)
#include <torch/data/datasets/base.h>
#include <torch/data/datasets/map.h>
#include <torch/data/samplers/sequential.h>
#include <torch/data/transforms/stack.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include <acc/acc.h>

#include "regression_data.h"

namespace {
using acc::testing::read_floats;
using acc::testing::Regression;
constexpr int64_t kFeatures = 4, kHidden = 16, kSamples = 40, kEpochs = 2, kBatch = 2;


}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: acc_precision_parity DIR accumulate|bf16\n";
    return 2;
  }
  const std::string dir = argv[1], mode = argv[2];
  auto options = acc::AcceleratorOptions().cpu(true);
  if (mode == "accumulate") options.gradient_accumulation_steps(4);
  if (mode == "bf16") options.mixed_precision(acc::MixedPrecision::BF16);
  acc::Accelerator accelerator(options);

  torch::nn::Sequential model(torch::nn::Linear(kFeatures, kHidden), torch::nn::Tanh(),
                              torch::nn::Linear(kHidden, 1));
  auto flat = read_floats(dir + "/init.bin", kHidden * kFeatures + 2 * kHidden + 1);
  acc::testing::load_flat_parameters(model->parameters(), flat);
  auto data = read_floats(dir + "/data.bin", kSamples * (kFeatures + 1));
  auto x = data.narrow(0, 0, kSamples * kFeatures).view({kSamples, kFeatures});
  auto y = data.narrow(0, kSamples * kFeatures, kSamples).view({kSamples, 1});

  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
  acc::Scheduler<acc::LambdaLR> scheduler(optimizer, [](int64_t s) { return std::pow(0.9, s); });
  accelerator.prepare(model, optimizer, scheduler);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      Regression(x, y).map(torch::data::transforms::Stack<>()), kBatch);

  std::ofstream out(dir + "/acc_" + mode + "_" + std::to_string(accelerator.process_index()) + ".txt");
  std::string output_dtype, loss_dtype;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    for (auto& batch : *loader) {
      auto guard = accelerator.accumulate(model);
      auto output = model->forward(batch.data);
      auto loss = torch::nn::functional::mse_loss(output, batch.target);
      output_dtype = c10::toString(output.scalar_type());
      loss_dtype = c10::toString(loss.scalar_type());
      accelerator.backward(loss);
      optimizer.step();
      scheduler.step();
      optimizer.zero_grad();
      char line[64];
      std::snprintf(line, sizeof line, "%.9g %.9g\n", loss.item<double>(),
                    optimizer.param_groups()[0].options().get_lr());
      out << line;
    }
  }
  std::ofstream(dir + "/acc_" + mode + "_dtypes.txt") << output_dtype << " " << loss_dtype << "\n";
  if (accelerator.is_main_process()) {
    std::vector<torch::Tensor> parts;
    for (auto& p : model->parameters()) parts.push_back(p.detach().reshape({-1}));
    auto weights = torch::cat(parts).contiguous();
    std::ofstream(dir + "/acc_" + mode + "_weights.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(weights.data_ptr<float>()), weights.numel() * sizeof(float));
  }
  accelerator.end_training();
  return 0;
}
