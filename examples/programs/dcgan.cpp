// A DCGAN-shaped program: two models, two optimizers, noise made on the device, one data loader.
#include <torch/torch.h>

#include <iostream>

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t i) override {
    auto x = torch::randn({2}) * 0.5 + 1.0;
    return {x, torch::ones({1})};
  }
  torch::optional<size_t> size() const override { return 256; }
};

int main() {
  torch::manual_seed(1);
  const int64_t kNoise = 8;
  torch::Device device(torch::kCUDA);
  if (!torch::cuda::is_available()) device = torch::Device(torch::kCPU);

  torch::nn::Sequential generator(torch::nn::Linear(kNoise, 16), torch::nn::ReLU(), torch::nn::Linear(16, 2));
  torch::nn::Sequential discriminator(torch::nn::Linear(2, 16), torch::nn::LeakyReLU(), torch::nn::Linear(16, 1),
                                      torch::nn::Sigmoid());
  generator->to(device);
  discriminator->to(device);
  torch::optim::Adam g_optimizer(generator->parameters(), torch::optim::AdamOptions(2e-4));
  torch::optim::Adam d_optimizer(discriminator->parameters(), torch::optim::AdamOptions(2e-4));

  auto loader = torch::data::make_data_loader(Points().map(torch::data::transforms::Stack<>()), 32);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (torch::data::Example<> &batch : *loader) {
      auto real = batch.data.to(device);
      const int64_t n = real.size(0);
      discriminator->zero_grad();
      auto d_real = torch::binary_cross_entropy(discriminator->forward(real), torch::ones({n, 1}, device));
      d_real.backward();
      auto noise = torch::randn({n, kNoise}, device);
      auto fake = generator->forward(noise);
      auto d_fake = torch::binary_cross_entropy(discriminator->forward(fake.detach()), torch::zeros({n, 1}, device));
      d_fake.backward();
      d_optimizer.step();

      generator->zero_grad();
      auto g_loss = torch::binary_cross_entropy(discriminator->forward(fake), torch::ones({n, 1}, device));
      g_loss.backward();
      g_optimizer.step();
      std::cout << "epoch " << epoch << " d " << (d_real + d_fake).item<float>() << " g " << g_loss.item<float>()
                << std::endl;
    }
  }
  torch::save(generator, "generator.pt");
}
