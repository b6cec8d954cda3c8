// acc's side of test/parity/precision_parity.py: the MLP regression of that script, trained from
// the weights and data it wrote, in one of these modes:
//   accumulate   gradient_accumulation_steps 4, LambdaLR 0.9^step as acc::Scheduler
//   bf16         mixed_precision bf16 (CPU autocast)
//   bf16_linear  bf16 on 3-d inputs (batch, 3, features), forward through torch::linear (at::linear,
//                what Python's nn.Linear calls): bit for bit Accelerate's losses
//   bf16_module  the same through torch::nn::Linear's forward (matmul, then += bias, on 3-d inputs)
//   adam         fp32, libtorch's Adam (lr 0.01) instead of SGD
//   three_ranks  fp32 on 3 processes: DDP's average of gradients rounds as torch DDP's
//   three_ranks_view  the same with gradient_as_bucket_view and zero_grad(set_to_none=false), so
//                that from the second step on the gradients are the buckets' views
// Each rank writes "loss lr" per batch, the dtypes it saw, and rank 0 the final weights.
//   usage: acc_precision_parity DIR MODE          (run by torchrun for 2 processes, 3 for three_*)
#include <torch/data/datasets/base.h>
#include <torch/data/datasets/map.h>
#include <torch/data/samplers/sequential.h>
#include <torch/data/transforms/stack.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
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
constexpr int64_t kFeatures = 4, kHidden = 16, kSamples = 40, kEpochs = 2, kBatch = 2, kSeq = 3;

// The loop both optimizers share: per batch "loss lr" to acc_MODE_RANK.txt, the dtypes seen, and
// rank 0's final weights.
template <class Opt, class Forward>
void train(acc::Accelerator& accelerator, torch::nn::Sequential& model, acc::Optimizer<Opt>& optimizer,
           const Forward& forward, const torch::Tensor& x, const torch::Tensor& y, const std::string& dir,
           const std::string& mode) {
  acc::Scheduler<acc::LambdaLR> scheduler(optimizer, [](int64_t s) { return std::pow(0.9, s); });
  accelerator.prepare(model, optimizer, scheduler);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      Regression(x, y).map(torch::data::transforms::Stack<>()), kBatch);

  std::ofstream out(dir + "/acc_" + mode + "_" + std::to_string(accelerator.process_index()) + ".txt");
  std::string output_dtype, loss_dtype;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    for (auto& batch : *loader) {
      auto guard = accelerator.accumulate(model);
      auto output = forward(batch.data);
      auto loss = torch::nn::functional::mse_loss(output, batch.target);
      output_dtype = c10::toString(output.scalar_type());
      loss_dtype = c10::toString(loss.scalar_type());
      accelerator.backward(loss);
      optimizer.step();
      scheduler.step();
      optimizer.zero_grad(/*set_to_none=*/mode != "three_ranks_view");
      char line[64];
      std::snprintf(line, sizeof line, "%.9g %.9g\n", loss.template item<double>(),
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
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: acc_precision_parity DIR "
                 "accumulate|bf16|bf16_linear|bf16_module|adam|three_ranks|three_ranks_view\n";
    return 2;
  }
  const std::string dir = argv[1], mode = argv[2];
  auto options = acc::AcceleratorOptions().cpu(true);
  if (mode == "accumulate") options.gradient_accumulation_steps(4);
  if (mode == "three_ranks_view") options.ddp(acc::DistributedDataParallelKwargs().gradient_as_bucket_view(true));
  const bool sequences = mode == "bf16_linear" || mode == "bf16_module";
  if (mode == "bf16" || sequences) options.mixed_precision(acc::MixedPrecision::BF16);
  acc::Accelerator accelerator(options);

  torch::nn::Sequential model(torch::nn::Linear(kFeatures, kHidden), torch::nn::Tanh(),
                              torch::nn::Linear(kHidden, 1));
  auto flat = read_floats(dir + "/init.bin", kHidden * kFeatures + 2 * kHidden + 1);
  acc::testing::load_flat_parameters(model->parameters(), flat);
  const int64_t seq = sequences ? kSeq : 1;
  auto data = read_floats(dir + (sequences ? "/data_seq.bin" : "/data.bin"), kSamples * seq * (kFeatures + 1));
  auto x = data.narrow(0, 0, kSamples * seq * kFeatures).view({kSamples, seq, kFeatures});
  auto y = data.narrow(0, kSamples * seq * kFeatures, kSamples * seq).view({kSamples, seq, 1});
  if (!sequences) x = x.squeeze(1), y = y.squeeze(1);
  auto first = model[0]->as<torch::nn::Linear>(), second = model[2]->as<torch::nn::Linear>();
  auto forward = [&](const torch::Tensor& input) {
    if (mode != "bf16_linear") return model->forward(input);
    return torch::linear(torch::tanh(torch::linear(input, first->weight, first->bias)), second->weight,
                         second->bias);
  };

  if (mode == "adam") {
    acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(0.01));
    train(accelerator, model, optimizer, forward, x, y, dir, mode);
  } else {
    acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
    train(accelerator, model, optimizer, forward, x, y, dir, mode);
  }
  accelerator.end_training();
  return 0;
}
