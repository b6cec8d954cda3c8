// The model, declared in the project's include folder: a file acc-migrate finds only with the
// project's own include flags.
#pragma once
#include <torch/torch.h>

struct RegressorImpl : torch::nn::Module {
  RegressorImpl();
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Linear hidden{nullptr}, out{nullptr};
};
TORCH_MODULE(Regressor);
