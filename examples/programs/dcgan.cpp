// A DCGAN-shaped program: two models, two optimizers, one data loader, targets made on the device.
// Usage: dcgan [batch size]  (each sample carries its own latent vector, drawn once from the seeded
// generator, and batches come in order: runs are reproducible)
#include <torch/torch.h>

#include <iostream>
#include <string>

constexpr int64_t kNoise = 8;

// Real points around (1, 1), each paired with the latent vector the generator turns into a fake one.
struct Points : torch::data::datasets::Dataset<Points> {
  explicit Points(int64_t n) : real(torch::randn({n, 2}) * 0.5 + 1.0), noise(torch::randn({n, kNoise})) {}
  torch::data::Example<> get(size_t i) override { return {real[i], noise[i]}; }
  torch::optional<size_t> size() const override { return real.size(0); }
  torch::Tensor real, noise;
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  torch::manual_seed(1);
  torch::Device device(torch::kCUDA);
  if (!torch::cuda::is_available()) device = torch::Device(torch::kCPU);

  torch::nn::Sequential generator(torch::nn::Linear(kNoise, 16), torch::nn::ReLU(), torch::nn::Linear(16, 2));
  torch::nn::Sequential discriminator(torch::nn::Linear(2, 16), torch::nn::LeakyReLU(), torch::nn::Linear(16, 1),
                                      torch::nn::Sigmoid());
  generator->to(device);
  discriminator->to(device);
  torch::optim::Adam g_optimizer(generator->parameters(), torch::optim::AdamOptions(2e-4));
  torch::optim::Adam d_optimizer(discriminator->parameters(), torch::optim::AdamOptions(2e-4));

  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Points(256).map(torch::data::transforms::Stack<>()), batch_size);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    for (torch::data::Example<> &batch : *loader) {
      auto real = batch.data.to(device);
      auto noise = batch.target.to(device);
      const int64_t n = real.size(0);
      discriminator->zero_grad();
      auto d_real = torch::binary_cross_entropy(discriminator->forward(real), torch::ones({n, 1}, device));
      d_real.backward();
      auto fake = generator->forward(noise);
      auto d_fake = torch::binary_cross_entropy(discriminator->forward(fake.detach()), torch::zeros({n, 1}, device));
      d_fake.backward();
      d_optimizer.step();

      generator->zero_grad();
      auto g_loss = torch::binary_cross_entropy(discriminator->forward(fake), torch::ones({n, 1}, device));
      g_loss.backward();
      g_optimizer.step();
      std::cout << "epoch " << epoch << " d_loss " << (d_real + d_fake).item<float>() << " g_loss "
                << g_loss.item<float>() << std::endl;
    }
  }
  torch::save(generator, "generator.pt");
}
