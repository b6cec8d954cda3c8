// The training loop both stages share, a function template in a header: main.cpp and finetune.cpp
// each include it and call it, so a migration must give it one accelerator from either caller.
#pragma once
#include <torch/torch.h>

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
