#include <acc/acc.h>

#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <iostream>

int main() {
  acc::Accelerator accelerator;
  auto model = torch::nn::Linear(4, 2);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  accelerator.backward(model->forward(torch::ones({3, 4})).sum());
  optimizer.step();
  std::cout << "acc " << ACC_VERSION << " consumer ran on " << accelerator.device() << " with "
            << accelerator.num_processes() << " process(es)" << std::endl;
  return 0;
}
