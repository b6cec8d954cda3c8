#include <iostream>

#include "data.h"

int main() {
  torch::nn::Linear model(4, 2);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  torch::optim::StepLR scheduler(optimizer, 1, 0.5);
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto loss = model->forward(torch::randn({8, 4})).sum();
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    scheduler.step();
    std::cout << "lr " << optimizer.param_groups()[0].options().get_lr() << "\n";
    std::cout << "accuracy " << accuracy(model, Points(64)) << "\n";
    std::cout << "last loss " << last_loss(model, Points(64)) << "\n";
  }
}
