#pragma once
// The benchmarks' model: `layers` square Linear layers of `width` with Tanh between them.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

namespace acc::bench {

inline torch::nn::Sequential make_tanh_mlp(int layers, int width) {
  torch::nn::Sequential model;
  for (int i = 0; i < layers; ++i) {
    model->push_back(torch::nn::Linear(width, width));
    if (i + 1 < layers) model->push_back(torch::nn::Tanh());
  }
  return model;
}

}  // namespace acc::bench
