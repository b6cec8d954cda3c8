// The second stage, in its own translation unit: called from main.cpp, it calls the header's loop.
#include "finetune.h"

#include "data.h"
#include "loop.h"

double finetune(torch::nn::Linear &model, int64_t batch_size, torch::Device device) {
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(1e-3));
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Pairs(0.5f).map(torch::data::transforms::Stack<>()), batch_size);
  double loss = 0;
  for (int epoch = 0; epoch < 2; ++epoch) loss = train_epoch(model, *loader, optimizer, device);
  return loss;
}
