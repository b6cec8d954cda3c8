// A trainer class that owns its model, built in init() as many projects do, and creates the
// optimizer over the member's parameters in fit(): the model is never a local of the loop's function.
#pragma once
#include <torch/torch.h>

#include <iostream>

struct Trainer {
  torch::nn::Sequential model{nullptr};

  void init() {
    model = torch::nn::Sequential(torch::nn::Linear(3, 8), torch::nn::Tanh(), torch::nn::Linear(8, 1));
  }

  template <typename Loader>
  void fit(Loader &loader, int epochs) {
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    for (int epoch = 0; epoch < epochs; ++epoch) {
      double total = 0;
      for (auto &batch : loader) {
        optimizer.zero_grad();
        auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
        loss.backward();
        optimizer.step();
        total += loss.template item<double>();
      }
      std::cout << "epoch " << epoch << " loss " << total << std::endl;
    }
  }
};
