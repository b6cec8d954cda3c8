// The evaluation helper, in a file of its own as in most projects: counts over a test loader divided
// by the test set's size.
#include "evaluate.h"

Evaluation evaluate(torch::nn::Sequential &model, Shapes test_set, int64_t batch_size, torch::Device device) {
  const size_t test_size = test_set.size().value();
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(test_set).map(torch::data::transforms::Stack<>()), batch_size);
  model->eval();
  torch::NoGradGuard no_grad;
  int64_t correct = 0;
  double loss_sum = 0;
  for (const auto &batch : *loader) {
    auto data = batch.data.to(device), targets = batch.target.to(device);
    auto output = model->forward(data);
    loss_sum += torch::nll_loss(output, targets, /*weight=*/{}, torch::Reduction::Sum).item<double>();
    correct += output.argmax(1).eq(targets).sum().item<int64_t>();
  }
  model->train();
  return {static_cast<double>(correct) / test_size, loss_sum / test_size};
}
