// Training split over files, as real projects are: the loop in a header template (loop.h) called here
// and from a second stage in another file (finetune.cpp), and a best-model save under a condition on
// this process's own loss. Usage: split_trainer [batch size]  (batches in order: reproducible runs)
#include "data.h"
#include "finetune.h"
#include "loop.h"

#include <iostream>
#include <limits>
#include <string>

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 16;
  torch::manual_seed(5);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  torch::nn::Linear model(2, 1);
  model->to(device);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Pairs().map(torch::data::transforms::Stack<>()), batch_size);
  double best = std::numeric_limits<double>::infinity();
  for (int epoch = 0; epoch < 3; ++epoch) {
    double loss = train_epoch(model, *loader, optimizer, device);
    std::cout << "epoch " << epoch << " loss " << loss << std::endl;
    if (loss < best) {
      best = loss;
      torch::save(model, "best.pt");
    }
  }
  std::cout << "finetuned loss " << finetune(model, batch_size, device) << std::endl;
}
