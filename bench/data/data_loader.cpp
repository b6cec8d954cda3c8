// Batches per second of acc's prepared loader on one process against libtorch's
// make_data_loader on the same dataset and options, measured in the same run (best of several
// epochs each, interleaved). Prints one line per configuration with the ratio prepared / plain.
//   usage: acc_bench_data_loader [epochs=7]
#include <torch/data/dataloader.h>
#include <torch/data/datasets/base.h>
#include <torch/data/samplers/random.h>
#include <torch/data/samplers/sequential.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include <acc/acc.h>

namespace {

// Batches are rows of an in-memory tensor: cheap to load, so loader overhead is what shows.
class Rows : public torch::data::datasets::BatchDataset<Rows, torch::Tensor> {
 public:
  explicit Rows(torch::Tensor data) : data_(std::move(data)) {}
  torch::Tensor get_batch(c10::ArrayRef<size_t> indices) override {
    auto index = torch::from_blob(const_cast<size_t*>(indices.data()),
                                  {static_cast<int64_t>(indices.size())}, torch::kLong);
    return data_.index_select(0, index);
  }
  std::optional<size_t> size() const override { return data_.size(0); }

 private:
  torch::Tensor data_;
};

template <typename Loader>
double batches_per_second(Loader& loader) {
  const auto start = std::chrono::steady_clock::now();
  int64_t batches = 0;
  double sink = 0;
  for (auto& batch : loader) {
    sink += batch.size(0);
    ++batches;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return sink > 0 ? batches / seconds : 0;
}

template <typename Sampler>
void compare(acc::Accelerator& accelerator, const torch::Tensor& data, const std::string& name,
             torch::data::DataLoaderOptions options, int epochs) {
  auto plain = torch::data::make_data_loader<Sampler>(Rows(data), options);
  auto prepared = accelerator.prepare_data_loader<Sampler>(Rows(data), options);
  double best_plain = 0, best_prepared = 0;
  for (int i = 0; i < epochs; ++i) {  // interleaved so that machine noise hits both alike
    best_plain = std::max(best_plain, batches_per_second(*plain));
    best_prepared = std::max(best_prepared, batches_per_second(*prepared));
  }
  std::printf("%-34s plain %9.0f batches/s   prepared %9.0f batches/s   ratio %.3f\n",
              name.c_str(), best_plain, best_prepared, best_prepared / best_plain);
}

}  // namespace

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 7;
  acc::Accelerator accelerator;
  torch::manual_seed(0);
  const auto data = torch::randn({65536, 32});
  using torch::data::samplers::RandomSampler;
  using torch::data::samplers::SequentialSampler;
  std::printf("acc prepared loader vs libtorch make_data_loader, 1 process, 65536 rows x 32, "
              "batch 64 (ratio > 1: prepared is faster)\n");
  compare<SequentialSampler>(accelerator, data, "sequential, 0 workers", 64, epochs);
  compare<RandomSampler>(accelerator, data, "random, 0 workers", 64, epochs);
  compare<SequentialSampler>(accelerator, data, "sequential, 2 workers",
                             torch::data::DataLoaderOptions(64).workers(2), epochs);
  compare<RandomSampler>(accelerator, data, "random, 2 workers",
                         torch::data::DataLoaderOptions(64).workers(2), epochs);
  return 0;
}
