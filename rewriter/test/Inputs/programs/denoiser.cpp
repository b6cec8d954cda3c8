// A denoising-diffusion toy in the shape of many GPU-only libtorch programs: the noise schedule is a
// global tensor made on the GPU, timesteps and noise come from factories given torch::kCUDA, and each
// batch is reshaped with the configured batch size. Complete and compilable against libtorch; it is
// kept for the rule tests (rules-act.test) because these shapes are the bugs that static-cuda,
// cuda-in-factory and view-batch-size report, which no example that runs on CPU processes can hold.
// Usage: denoiser [batch size]
#include <torch/torch.h>

#include <iostream>
#include <string>

constexpr int64_t kSteps = 100;

// Made during static initialisation: before main, and on cuda:0 in every process.
static const torch::Tensor kBetas = torch::linspace(1e-4, 0.02, kSteps).to(torch::kCUDA);

struct Images : torch::data::datasets::Dataset<Images> {
  explicit Images(int64_t n) : images(torch::rand({n, 1, 8, 8})) {}
  torch::data::Example<> get(size_t i) override { return {images[i], torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return images.size(0); }
  torch::Tensor images;
};

struct DenoiserImpl : torch::nn::Module {
  DenoiserImpl() : body(register_module("body", torch::nn::Linear(64 + 1, 64))) {}
  torch::Tensor forward(torch::Tensor noisy, torch::Tensor t) {
    return body->forward(torch::cat({noisy, t.unsqueeze(1).to(noisy.dtype()) / kSteps}, 1));
  }
  torch::nn::Linear body;
};
TORCH_MODULE(Denoiser);

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 16;
  torch::manual_seed(7);
  torch::Device device(torch::kCUDA);
  Denoiser model;
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  auto loader = torch::data::make_data_loader(Images(200).map(torch::data::transforms::Stack<>()), batch_size);
  const torch::Tensor alphas = torch::cumprod(1 - kBetas, 0);
  for (int epoch = 0; epoch < 3; ++epoch) {
    double total = 0;
    for (auto &batch : *loader) {
      // The last batch holds 200 % batch_size images, not batch_size.
      auto x = batch.data.to(device).view({batch_size, 64});
      auto t = torch::randint(kSteps, {x.size(0)}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
      auto noise = torch::randn({x.size(0), 64}, torch::kCUDA);
      auto a = alphas.index_select(0, t).unsqueeze(1);
      auto noisy = a.sqrt() * x + (1 - a).sqrt() * noise;
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(noisy, t), noise);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
    }
    std::cout << "epoch " << epoch << " loss " << total << std::endl;
  }
}
