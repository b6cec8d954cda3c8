// A training program that keeps its own records, as many do: a run directory, a metrics CSV appended
// every epoch, a progress line counted against the dataset's size. Complete and compilable against
// libtorch; kept for the rule tests (rules-act.test): every process of a migrated run would write the
// same files and count its own share as the whole, which every-rank-side-effect reports.
// Usage: metrics_log [batch size]
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

struct Squares : torch::data::datasets::Dataset<Squares> {
  Squares() : x(torch::rand({240, 1}) * 2 - 1) {}
  torch::data::Example<> get(size_t i) override { return {x[i], x[i] * x[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
  torch::Tensor x;
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 24;
  torch::manual_seed(8);
  torch::nn::Sequential model(torch::nn::Linear(1, 16), torch::nn::Tanh(), torch::nn::Linear(16, 1));
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  Squares data;
  const size_t samples = data.size().value();
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(data).map(torch::data::transforms::Stack<>()), batch_size);
  std::filesystem::create_directories("runs/squares");
  std::ofstream metrics("runs/squares/metrics.csv");
  metrics << "epoch,loss\n";
  for (int epoch = 0; epoch < 3; ++epoch) {
    double total = 0;
    size_t seen = 0;
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      seen += batch.data.size(0);
      if (seen == samples) std::cout << "epoch " << epoch << " done" << std::endl;
    }
    metrics << epoch << "," << total << "\n";
  }
}
