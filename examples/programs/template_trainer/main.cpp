// Builds the model, optimizer and loader, then calls the header's templated training loop.
// Usage: template_trainer [batch size]  (batches in order, no shuffling: runs are reproducible)
#include "trainer.h"

#include <string>

struct Pairs : torch::data::datasets::Dataset<Pairs> {
  torch::data::Example<> get(size_t i) override {
    auto x = torch::full({2}, static_cast<float>(i % 7));
    return {x, x.sum().unsqueeze(0)};
  }
  torch::optional<size_t> size() const override { return 128; }
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 16;
  torch::manual_seed(4);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  torch::nn::Linear model(2, 1);
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Pairs().map(torch::data::transforms::Stack<>()), batch_size);
  for (int epoch = 0; epoch < 3; ++epoch)
    std::cout << "epoch " << epoch << " loss " << train_epoch(model, *loader, optimizer, device) << std::endl;
}
