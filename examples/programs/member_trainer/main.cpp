// A trainer class with a member model (trainer.h), and data made in parallel with OpenMP: the build
// compiles this file with GCC's -fopenmp, so acc-migrate reads a compile command clang cannot take as
// it is. Usage: member_trainer [batch size]  (batches in order: reproducible runs)
#include "trainer.h"

#include <omp.h>

#include <string>
#include <vector>

struct Curve : torch::data::datasets::Dataset<Curve> {
  Curve() : x(torch::linspace(-1, 1, 192).unsqueeze(1).repeat({1, 3})), y(torch::empty({192, 1})) {
    std::vector<float> values(192);
#pragma omp parallel for
    for (int i = 0; i < 192; ++i) values[i] = static_cast<float>(i % 12) / 12.0f - 0.5f;
    y.copy_(torch::tensor(values).unsqueeze(1));
  }
  torch::data::Example<> get(size_t i) override { return {x[i], y[i]}; }
  torch::optional<size_t> size() const override { return x.size(0); }
  torch::Tensor x, y;
};

int main(int argc, char **argv) {
  const int64_t batch_size = argc > 1 ? std::stoll(argv[1]) : 32;
  torch::manual_seed(6);
  Trainer trainer;
  trainer.init();
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      Curve().map(torch::data::transforms::Stack<>()), batch_size);
  trainer.fit(*loader, 3);
}
