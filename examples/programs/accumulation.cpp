// Gradient accumulation by hand, as single-device libtorch code does it to train with batches larger
// than fit at once: the loss divided by the number of batches accumulated, the optimizer stepped after
// every fourth batch. A regression on synthetic data (no download); `acc-migrate` turns the loop into
// accelerator.accumulate.
// Usage: accumulation [batch size]  (batches in order, no shuffling: runs are reproducible)
#include <torch/torch.h>

#include <cstdio>
#include <string>

// y = x . w + noise, drawn once from the seed.
struct SyntheticRegression : torch::data::datasets::Dataset<SyntheticRegression> {
  explicit SyntheticRegression(int64_t n)
      : inputs(torch::randn({n, 8})), targets(inputs.matmul(torch::randn({8, 1})) + 0.1 * torch::randn({n, 1})) {}
  torch::data::Example<> get(size_t i) override { return {inputs[i], targets[i]}; }
  torch::optional<size_t> size() const override { return inputs.size(0); }
  torch::Tensor inputs, targets;
};

struct RegressorImpl : torch::nn::Module {
  RegressorImpl()
      : hidden(register_module("hidden", torch::nn::Linear(8, 16))), out(register_module("out", torch::nn::Linear(16, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return out->forward(torch::tanh(hidden->forward(x))); }
  torch::nn::Linear hidden, out;
};
TORCH_MODULE(Regressor);

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  const int accumulation_steps = 4;  // one optimizer step per 4 batches: an effective batch of 4 * batch_size
  torch::manual_seed(0);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  Regressor model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      SyntheticRegression(512).map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions(batch_size));

  int step = 0;
  for (int epoch = 1; epoch <= 3; ++epoch) {
    model->train();
    double epoch_loss = 0, group_loss = 0;
    int64_t batches = 0;
    for (auto &batch : *loader) {
      auto data = batch.data.to(device), targets = batch.target.to(device);
      auto loss = torch::mse_loss(model->forward(data), targets) / accumulation_steps;
      loss.backward();
      group_loss += loss.item<double>();  // the group's mean loss once its 4 batches are in
      if ((batches + 1) % accumulation_steps == 0) {
        optimizer.step();
        optimizer.zero_grad();
        ++step;
        std::printf("epoch %d step %d loss %.6f\n", epoch, step, group_loss);
        group_loss = 0;
      }
      epoch_loss += loss.item<double>() * accumulation_steps;
      ++batches;
    }
    std::printf("epoch %d mean loss %.6f\n", epoch, epoch_loss / batches);
  }
}
