#include "data.h"

double accuracy(torch::nn::Linear &model, Points data) {
  const size_t samples = data.size().value();
  auto loader = torch::data::make_data_loader(std::move(data).map(torch::data::transforms::Stack<>()), 8);
  int64_t correct = 0;
  for (const auto &batch : *loader) correct += model->forward(batch.data).argmax(1).eq(batch.target).sum().item<int64_t>();
  return static_cast<double>(correct) / samples;
}

double last_loss(torch::nn::Linear &model, Points data) {
  auto loader = torch::data::make_data_loader(std::move(data).map(torch::data::transforms::Stack<>()), 8);
  double loss = 0;
  for (const auto &batch : *loader) loss = torch::nn::functional::cross_entropy(model->forward(batch.data), batch.target).item<double>();
  return loss;
}
