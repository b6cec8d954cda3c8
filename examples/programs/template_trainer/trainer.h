// A header-only trainer: the loop lives in a function template, as in many libtorch projects.
#pragma once
#include <torch/torch.h>

#include <iostream>

template <typename Model, typename Loader>
double train_epoch(Model &model, Loader &loader, torch::optim::Optimizer &optimizer, torch::Device device) {
  double total = 0;
  for (auto &batch : loader) {
    auto data = batch.data.to(device);
    auto target = batch.target.to(device);
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(data), target);
    loss.backward();
    optimizer.step();
    total += loss.template item<double>();
  }
  return total;
}
