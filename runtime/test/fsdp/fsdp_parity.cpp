// acc's side of test/parity/fsdp_parity.py: trains the script's model from the weights and data it
// wrote, with the prepared (unshuffled) loader and Adam, under the FSDP configuration torchrun's
// environment gives (the script sets SHARD_GRAD_OP), and writes each rank's per-step losses and
// Adam-state element count, and rank 0's final weights.
//   usage: acc_fsdp_parity DIR BATCH_SIZE     (run by torchrun for 2 processes)
#include <torch/data/datasets/map.h>
#include <torch/data/samplers/sequential.h>
#include <torch/data/transforms/stack.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/types.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <acc/acc.h>

#include "regression_data.h"

namespace {

constexpr int64_t kFeatures = 4, kHidden = 15, kMiddle = 2, kSteps = 10;
constexpr double kLr = 0.01;

// The script's Net, parameters registered in the same order (gain first, as Python lists a
// module's own parameters before its children's).
struct NetImpl : torch::nn::Module {
  NetImpl() {
    gain = register_parameter("gain", torch::ones({1}));
    l1 = register_module("l1", torch::nn::Linear(kFeatures, kHidden));
    l2 = register_module("l2", torch::nn::Linear(kHidden, kMiddle));
    l3 = register_module("l3", torch::nn::Linear(kMiddle, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    acc::ForwardHooksGuard forward_hooks(*this);  // FULL_SHARD: the model is the one unit
    return l3->forward(torch::tanh(l2->forward(torch::tanh(l1->forward(x))))) * gain;
  }
  torch::Tensor gain;
  torch::nn::Linear l1{nullptr}, l2{nullptr}, l3{nullptr};
};
TORCH_MODULE(Net);

// The weights file is only meaningful if both models list the same tensors in the same order.
void check_same_parameters(const Net& model, const std::string& names_file) {
  std::ifstream in(names_file);
  std::ostringstream expected, ours;
  expected << in.rdbuf();
  for (const auto& item : model->named_parameters()) {
    ours << item.key();
    for (int64_t d : item.value().sizes()) ours << ' ' << d;
    ours << '\n';
  }
  if (ours.str() != expected.str()) {
    throw std::runtime_error("the C++ model differs from the script's; script:\n" + expected.str() +
                             "C++:\n" + ours.str());
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: acc_fsdp_parity DIR BATCH_SIZE\n";
    return 2;
  }
  const std::string dir = argv[1];
  const size_t batch_size = std::stoul(argv[2]);
  acc::Accelerator accelerator(acc::AcceleratorOptions().cpu(true));
  if (accelerator.distributed_type() != acc::DistributedType::FSDP) {
    std::cerr << "distributed_type() is " << acc::to_string(accelerator.distributed_type())
              << ", not FSDP: run under torchrun with ACCELERATE_USE_FSDP=true\n";
    return 1;
  }

  Net model;
  check_same_parameters(model, dir + "/names.txt");
  int64_t count = 0;
  for (const auto& p : model->parameters()) count += p.numel();
  acc::testing::load_flat_parameters(model->parameters(), acc::testing::read_floats(dir + "/init.bin", count));
  const int64_t samples = kSteps * static_cast<int64_t>(batch_size) * accelerator.num_processes();
  auto data = acc::testing::read_floats(dir + "/data.bin", samples * (kFeatures + 1));
  auto x = data.narrow(0, 0, samples * kFeatures).view({samples, kFeatures});
  auto y = data.narrow(0, samples * kFeatures, samples).view({samples, 1});

  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(kLr));
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      acc::testing::Regression(x, y).map(torch::data::transforms::Stack<>()), batch_size);

  std::string losses;
  for (auto& batch : *loader) {
    optimizer.zero_grad();
    auto loss = torch::nn::functional::mse_loss(model->forward(batch.data), batch.target);
    accelerator.backward(loss);
    optimizer.step();
    char text[32];
    std::snprintf(text, sizeof text, "%.9g\n", loss.item<double>());
    losses += text;
  }
  const std::string rank = std::to_string(accelerator.process_index());
  write_text(dir + "/acc_losses_" + rank + ".txt", losses);
  int64_t state = 0;
  for (const auto& [key, value] : optimizer.state()) {
    state += static_cast<const torch::optim::AdamParamState&>(*value).exp_avg().numel();
  }
  write_text(dir + "/acc_state_" + rank + ".txt", std::to_string(state) + "\n");
  const char* strategy = std::getenv("FSDP_SHARDING_STRATEGY");
  if (strategy != nullptr && std::string(strategy) == "FULL_SHARD") {
    for (const auto& p : model->parameters()) {
      if (p.storage().nbytes() != 0) {
        std::cerr << "FULL_SHARD left a parameter whole between steps\n";
        return 1;
      }
    }
  }
  if (auto whole = accelerator.summon_full_params(model, /*writeback=*/false); accelerator.is_main_process()) {
    std::vector<torch::Tensor> parts;
    for (const auto& p : model->parameters()) parts.push_back(p.detach().reshape({-1}));
    auto weights = torch::cat(parts).contiguous();
    std::ofstream file(dir + "/acc_weights.bin", std::ios::binary);
    file.write(reinterpret_cast<const char*>(weights.data_ptr<float>()), weights.numel() * sizeof(float));
  }
  accelerator.end_training();
  return 0;
}
