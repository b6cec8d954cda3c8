#include <torch/torch.h>

struct NetImpl : torch::nn::Module {};

void fit(std::shared_ptr<NetImpl> model, torch::Tensor data) {
  torch::optim::Adam opt(model->parameters());
  for (int step = 0; step < 4; ++step) {
    auto loss = data.sum();
    loss.backward();
  }
}

int main() {
  auto model = std::make_shared<NetImpl>();
  fit(model, torch::Tensor());
}
