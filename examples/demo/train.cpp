// acc's demo: a small regression MLP trained on synthetic data with DDP. Run it as
//   acc-launch --cpu --num_processes 2 acc-demo-train      (or plainly, as one process)
// The prepared data loader gives each process its share of every global batch (split_batches),
// shuffled alike on all ranks; gradients are averaged in buckets during backward, so every rank
// holds the same model after each step. A held-out set is then evaluated across processes with
// gather_for_metrics, which counts every sample exactly once. The main process writes TensorBoard
// logs to runs/acc_demo (open them with `tensorboard --logdir runs`) and draws a progress bar.
#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <string>

#include <acc/acc.h>

// Batches are rows of in-memory tensors, gathered in one index_select per batch.
class Rows : public torch::data::datasets::BatchDataset<Rows, torch::data::Example<>> {
 public:
  Rows(torch::Tensor x, torch::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  torch::data::Example<> get_batch(c10::ArrayRef<size_t> indices) override {
    auto index = torch::tensor(std::vector<int64_t>(indices.begin(), indices.end()));
    return {x_.index_select(0, index), y_.index_select(0, index)};
  }
  std::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

int main(int argc, char** argv) {
  const int epochs = argc > 1 ? std::atoi(argv[1]) : 4;
  const int64_t dataset_size = 16384, eval_size = 1000, global_batch = 256, features = 32;

  acc::Accelerator accelerator(acc::AcceleratorOptions()
                                   .split_batches(true)
                                   .log_with("tensorboard")
                                   .project_config(acc::ProjectConfiguration().project_dir("runs")));
  accelerator.init_trackers("acc_demo", {{"lr", 1e-3}, {"global_batch", global_batch}, {"epochs", epochs}});
  accelerator.print("acc demo: ", accelerator.num_processes(), " process(es), ",
                    acc::to_string(accelerator.distributed_type()), " on ", accelerator.device());

  // The same synthetic data set on every rank: y = sin(x . w) + noise.
  torch::manual_seed(0);
  auto inputs = torch::randn({dataset_size + eval_size, features});
  auto targets = torch::sin(inputs.matmul(torch::randn({features, 1}) / 4)) +
                 0.01 * torch::randn({dataset_size + eval_size, 1});
  // Global batches of 256, each split between the processes; the eval set (1000 = 3 x 256 + 232)
  // is not a multiple of the global batch, so its last batch is padded across ranks.
  auto train_loader = accelerator.prepare_data_loader(
      Rows(inputs.narrow(0, 0, dataset_size), targets.narrow(0, 0, dataset_size)),
      torch::data::DataLoaderOptions(global_batch).drop_last(true));
  auto eval_loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      Rows(inputs.narrow(0, dataset_size, eval_size), targets.narrow(0, dataset_size, eval_size)),
      global_batch);

  // Different seeds per rank on purpose: prepare() broadcasts rank 0's weights.
  acc::set_seed(1, /*device_specific=*/true);
  torch::nn::Sequential model(torch::nn::Linear(features, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 256), torch::nn::ReLU(),
                              torch::nn::Linear(256, 1));
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), 1e-3);
  accelerator.prepare(model, optimizer);

  const auto start = std::chrono::steady_clock::now();
  int64_t samples = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    torch::Tensor epoch_loss = torch::zeros({});
    int64_t steps = 0;
    auto bar = accelerator.progress_bar(static_cast<int64_t>(train_loader->size()),
                                        "epoch " + std::to_string(epoch + 1));
    for (auto& batch : *train_loader) {
      const auto& x = batch.data;
      const auto& y = batch.target;
      optimizer.zero_grad();
      auto loss = torch::nn::functional::mse_loss(model->forward(x), y);
      accelerator.backward(loss);
      optimizer.step();
      epoch_loss += loss.detach();
      ++steps;
      samples += global_batch;
      bar.update();
    }
    bar.close();
    auto mean_loss = accelerator.reduce(epoch_loss / steps, "mean").item<double>();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    accelerator.print("epoch ", epoch + 1, "/", epochs, "  loss ", std::fixed,
                      std::setprecision(5), mean_loss, "  ", std::setprecision(0),
                      samples / seconds, " samples/s");
    accelerator.log({{"loss", mean_loss}, {"samples_per_s", samples / seconds}}, epoch + 1);
  }

  // Distributed evaluation: each rank scores its share; gather_for_metrics drops the samples
  // repeated to even out the last batch, so the metric covers each eval sample exactly once.
  torch::Tensor squared_error_sum = torch::zeros({});
  int64_t evaluated = 0;
  {
    torch::NoGradGuard no_grad;
    for (auto& batch : *eval_loader) {
      auto errors = (model->forward(batch.data) - batch.target).pow(2).flatten();
      auto all_errors = accelerator.gather_for_metrics(errors);
      squared_error_sum += all_errors.sum();
      evaluated += all_errors.size(0);
    }
  }
  accelerator.print("eval MSE ", std::fixed, std::setprecision(5),
                    squared_error_sum.item<double>() / evaluated, " over ", evaluated,
                    " held-out samples (", eval_size, " in the set)");

  // Every rank ends with the same weights: DDP kept them in sync.
  auto weights = accelerator.gather(model[0]->as<torch::nn::Linear>()->weight.detach().reshape({1, -1}));
  bool in_sync = true;
  for (int64_t r = 1; r < weights.size(0); ++r) in_sync = in_sync && torch::equal(weights[r], weights[0]);
  accelerator.print("weights identical on all ", accelerator.num_processes(),
                    " processes: ", in_sync ? "yes" : "NO");
  accelerator.end_training();
  return in_sync && evaluated == eval_size ? 0 : 1;
}
