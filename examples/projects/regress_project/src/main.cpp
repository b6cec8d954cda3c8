// Regression on fixed random data. Usage: regress [batch size]  (batches in order: reproducible runs)
#include <torch/torch.h>

#include "model.h"

#include <iostream>
#include <string>

struct Points : torch::data::datasets::Dataset<Points> {
  Points() : x(torch::randn({256, 4})), y(x.sum(1, /*keepdim=*/true).sin()) {}
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
  torch::Tensor x, y;
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  torch::manual_seed(7);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  Regressor model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Points().map(torch::data::transforms::Stack<>()), batch_size);
  for (int epoch = 0; epoch < 3; ++epoch) {
    double total = 0;
    for (auto &batch : *loader) {
      auto x = batch.data.to(device), y = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
    }
    std::cout << "epoch " << epoch << " loss " << total << std::endl;
  }
}
