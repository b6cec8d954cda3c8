// acc's demo: a small regression MLP trained on synthetic data with DDP. Run it as
//   acc-launch --cpu --num_processes 2 acc-demo-train      (or plainly, as one process)
// Each process trains on its share of every global batch; gradients are averaged in buckets
// during backward, so every rank holds the same model after each step.
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <string>

#include <acc/acc.h>

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 4;
  const int64_t dataset_size = 16384, global_batch = 256, features = 32;

  acc::Accelerator accelerator;
  accelerator.print("acc demo: ", accelerator.num_processes(), " process(es), ",
                    acc::to_string(accelerator.distributed_type()), " on ", accelerator.device());

  // The same synthetic data set on every rank: y = sin(x . w) + noise.
  torch::manual_seed(0);
  auto inputs = torch::randn({dataset_size, features});
  auto targets = torch::sin(inputs.matmul(torch::randn({features, 1}) / 4)) +
                 0.01 * torch::randn({dataset_size, 1});

  // Different seeds per rank on purpose: prepare() broadcasts rank 0's weights.
  acc::set_seed(1, /*device_specific=*/true);
  torch::nn::Sequential model(torch::nn::Linear(features, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 1));
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), 1e-3);
  accelerator.prepare(model, optimizer);

  const auto start = std::chrono::steady_clock::now();
  int64_t samples = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    torch::manual_seed(100 + epoch);  // the same shuffle on every rank
    auto order = torch::randperm(dataset_size);
    torch::Tensor epoch_loss = torch::zeros({});
    int64_t steps = 0;
    for (int64_t begin = 0; begin + global_batch <= dataset_size; begin += global_batch) {
      auto batch = accelerator.split_between_processes(order.narrow(0, begin, global_batch));
      auto x = inputs.index_select(0, batch).to(accelerator.device());
      auto y = targets.index_select(0, batch).to(accelerator.device());
      optimizer.zero_grad();
      auto loss = torch::nn::functional::mse_loss(model->forward(x), y);
      accelerator.backward(loss);
      optimizer.step();
      epoch_loss += loss.detach();
      ++steps;
      samples += global_batch;
    }
    auto mean_loss = accelerator.reduce(epoch_loss / steps, "mean").item<double>();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    accelerator.print("epoch ", epoch + 1, "/", epochs, "  loss ", std::fixed,
                      std::setprecision(5), mean_loss, "  ", std::setprecision(0),
                      samples / seconds, " samples/s");
  }

  // Every rank ends with the same weights: DDP kept them in sync.
  auto weights = accelerator.gather(model[0]->as<torch::nn::Linear>()->weight.detach().reshape({1, -1}));
  bool in_sync = true;
  for (int64_t r = 1; r < weights.size(0); ++r) in_sync = in_sync && torch::equal(weights[r], weights[0]);
  accelerator.print("weights identical on all ", accelerator.num_processes(),
                    " processes: ", in_sync ? "yes" : "NO");
  accelerator.end_training();
  return in_sync ? 0 : 1;
}
