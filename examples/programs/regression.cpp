// Linear regression with an LR scheduler stepped once per epoch and gradient clipping, model held by
// shared_ptr. Usage: regression [batch size]  (batches in order, no shuffling: runs are reproducible)
#include <torch/torch.h>

#include <iostream>
#include <string>

struct Samples : torch::data::datasets::Dataset<Samples> {
  Samples() : x(torch::randn({256, 4})), y(x.matmul(torch::tensor({1.0f, -2.0f, 3.0f, 0.5f})).unsqueeze(1)) {}
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
  torch::Tensor x, y;
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  torch::manual_seed(3);
  torch::DeviceType device_type = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
  torch::Device device(device_type);
  auto model = std::make_shared<torch::nn::LinearImpl>(4, 1);
  model->to(device, torch::kFloat);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/2, /*gamma=*/0.5);
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Samples().map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions().batch_size(batch_size));
  for (int epoch = 0; epoch < 4; ++epoch) {
    double total = 0;
    for (auto &batch : *loader) {
      auto x = batch.data.to(device);
      auto y = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
      optimizer.step();
      total += loss.item<double>();
    }
    scheduler.step();
    std::cout << "epoch " << epoch << " loss " << total << std::endl;
  }
}
