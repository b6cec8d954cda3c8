#pragma once
#include <torch/torch.h>

struct Points : torch::data::datasets::Dataset<Points> {
  explicit Points(int64_t n) : x(torch::randn({n, 4})), y(torch::randint(2, {n})) {}
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
  torch::Tensor x, y;
};

// accuracy(): correct predictions over a loader, divided by the dataset's size (gather-for-metrics
// makes it the same on every process). last_loss(): the last batch's loss, each process its own.
double accuracy(torch::nn::Linear &model, Points data);
double last_loss(torch::nn::Linear &model, Points data);
