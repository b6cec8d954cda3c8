// An MNIST-style classifier on a synthetic dataset (no download): train and eval loops, the shape of
// most libtorch classifier examples. Single device; `acc-migrate` converts it.
// Usage: mnist_classifier [batch size]  (batches in order, no shuffling: runs are reproducible)
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <string>

// A sample is the image of its class (one of ten fixed "digits") under heavy noise: learnable, no download.
struct SyntheticDigits : torch::data::datasets::Dataset<SyntheticDigits> {
  SyntheticDigits(const torch::Tensor &digits, int64_t n)
      : labels(torch::randint(10, {n})), images(digits.index_select(0, labels) + 2.0 * torch::randn({n, 1, 28, 28})) {}
  torch::data::Example<> get(size_t i) override { return {images[i], labels[i]}; }
  torch::optional<size_t> size() const override { return images.size(0); }
  torch::Tensor labels, images;
};

struct NetImpl : torch::nn::Module {
  NetImpl() : fc1(register_module("fc1", torch::nn::Linear(784, 64))), fc2(register_module("fc2", torch::nn::Linear(64, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(fc1->forward(x.view({x.size(0), 784})));
    return torch::log_softmax(fc2->forward(x), /*dim=*/1);
  }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Net);

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 64;
  torch::manual_seed(0);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  Net model;
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.5));

  const torch::Tensor digits = torch::randn({10, 1, 28, 28});
  auto train_set = SyntheticDigits(digits, 512).map(torch::data::transforms::Stack<>());
  auto test_set = SyntheticDigits(digits, 128).map(torch::data::transforms::Stack<>());
  const size_t test_size = test_set.size().value();
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(train_set), torch::data::DataLoaderOptions(batch_size));
  auto test_loader =
      torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(std::move(test_set), batch_size);

  for (int epoch = 1; epoch <= 2; ++epoch) {
    model->train();
    for (auto &batch : *train_loader) {
      auto data = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::nll_loss(model->forward(data), targets);
      loss.backward();
      optimizer.step();
      std::printf("epoch %d loss %.6f\n", epoch, loss.item<float>());
    }
    model->eval();
    torch::NoGradGuard no_grad;
    int64_t correct = 0;
    for (const auto &batch : *test_loader) {
      auto data = batch.data.to(device), targets = batch.target.to(device);
      auto pred = model->forward(data).argmax(1);
      correct += pred.eq(targets).sum().item<int64_t>();
    }
    std::cout << "accuracy " << static_cast<double>(correct) / test_size << std::endl;
  }
  torch::save(model, "mnist_model.pt");
}
