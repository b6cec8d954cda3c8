// acc's side of test/parity/training_parity.py: trains the MLP regression from the weights and
// data the script wrote, with the prepared (unshuffled) loader, SGD and DDP, and writes each
// rank's per-step losses and rank 0's final weights next to them.
//   usage: acc_data_train_parity DIR BATCH_SIZE     (run by torchrun for 2 processes)
#include <torch/data/dataloader_options.h>
#include <torch/data/datasets/base.h>
#include <torch/data/datasets/map.h>
#include <torch/data/samplers/sequential.h>
#include <torch/data/transforms/stack.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <acc/acc.h>

#include "regression_data.h"

namespace {
using acc::testing::read_floats;
using acc::testing::Regression;

constexpr int64_t kFeatures = 4, kHidden = 16, kSamples = 48, kEpochs = 3;



}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: acc_data_train_parity DIR BATCH_SIZE\n";
    return 2;
  }
  const std::string dir = argv[1];
  const size_t batch_size = std::stoul(argv[2]);
  acc::Accelerator accelerator(acc::AcceleratorOptions().cpu(true));

  torch::nn::Sequential model(torch::nn::Linear(kFeatures, kHidden), torch::nn::Tanh(),
                              torch::nn::Linear(kHidden, 1));
  const int64_t parameter_count = kHidden * kFeatures + kHidden + kHidden + 1;
  auto flat = read_floats(dir + "/init.bin", parameter_count);
  acc::testing::load_flat_parameters(model->parameters(), flat);
  auto data = read_floats(dir + "/data.bin", kSamples * (kFeatures + 1));
  auto x = data.narrow(0, 0, kSamples * kFeatures).view({kSamples, kFeatures});
  auto y = data.narrow(0, kSamples * kFeatures, kSamples).view({kSamples, 1});

  torch::optim::SGD optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      Regression(x, y).map(torch::data::transforms::Stack<>()), batch_size);

  std::vector<double> losses;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    for (auto& batch : *loader) {
      optimizer.zero_grad();
      auto loss = torch::nn::functional::mse_loss(model->forward(batch.data), batch.target);
      accelerator.backward(loss);
      optimizer.step();
      losses.push_back(loss.item<double>());
    }
  }
  const std::string tag = "acc_" + std::to_string(accelerator.num_processes());
  std::ofstream out(dir + "/" + tag + "_losses_" + std::to_string(accelerator.process_index()) +
                    ".txt");
  for (double loss : losses) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g\n", loss);
    out << text;
  }
  if (accelerator.is_main_process()) {
    std::vector<torch::Tensor> parts;
    for (auto& p : model->parameters()) parts.push_back(p.detach().reshape({-1}));
    auto weights = torch::cat(parts).contiguous();
    std::ofstream file(dir + "/" + tag + "_weights.bin", std::ios::binary);
    file.write(reinterpret_cast<const char*>(weights.data_ptr<float>()),
               weights.numel() * sizeof(float));
  }
  accelerator.end_training();
  return 0;
}
