// A small CNN on synthetic shapes, the shape of a user's own program: a custom Dataset (data.h), an
// evaluate() helper in another file (evaluate.cpp), SGD with a StepLR stepped each epoch, a metrics
// CSV appended each epoch, and the best model by validation loss saved, then loaded back for a
// final evaluation. Usage: cnn_trainer [batch size] [epochs]  (batches in order, data drawn once from
// a seed: runs are reproducible)
#include "data.h"
#include "evaluate.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 3;
  torch::manual_seed(7);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  torch::nn::Sequential model(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 8, 3).padding(1)), torch::nn::ReLU(),
                              torch::nn::MaxPool2d(2), torch::nn::Conv2d(torch::nn::Conv2dOptions(8, 16, 3).padding(1)),
                              torch::nn::ReLU(), torch::nn::MaxPool2d(2), torch::nn::Flatten(),
                              torch::nn::Linear(16 * 4 * 4, 4), torch::nn::LogSoftmax(1));
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.02).momentum(0.9));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/1, /*gamma=*/0.5);

  const torch::Tensor patterns = torch::randn({4, 1, 16, 16});
  Shapes train_set(patterns, 512);
  const Shapes test_set(patterns, 128);
  auto train_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(train_set).map(torch::data::transforms::Stack<>()), batch_size);

  std::filesystem::create_directories("runs");
  {
    std::ofstream header("runs/metrics.csv");
    header << "epoch,lr,train_loss,val_loss,accuracy\n";
  }
  double best = std::numeric_limits<double>::infinity();
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const double lr = optimizer.param_groups()[0].options().get_lr();
    double loss_sum = 0;
    int64_t batches = 0;
    for (auto &batch : *train_loader) {
      auto data = batch.data.to(device), targets = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::nll_loss(model->forward(data), targets);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++batches;
    }
    scheduler.step();
    const Evaluation eval = evaluate(model, test_set, batch_size, device);
    const double train_loss = loss_sum / batches, val_loss = eval.loss;
    std::printf("epoch %d lr %.4f train_loss %.6f val_loss %.6f accuracy %.4f\n", epoch, lr, train_loss, val_loss,
                eval.accuracy);
    std::ofstream csv("runs/metrics.csv", std::ios::app);
    csv << epoch << "," << lr << "," << train_loss << "," << val_loss << "," << eval.accuracy << "\n";
    if (val_loss < best) {
      best = val_loss;
      torch::save(model, "runs/best.pt");
    }
  }
  torch::load(model, "runs/best.pt");
  const Evaluation final_eval = evaluate(model, test_set, batch_size, device);
  std::printf("best val_loss %.6f accuracy %.4f\n", final_eval.loss, final_eval.accuracy);
}
