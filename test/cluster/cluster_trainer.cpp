// The training program of the engine tests (test/cluster): what a user's libtorch program looks like
// when SLURM, mpirun, torchrun or acc-launch starts it. A small regression MLP, DDP, split batches:
// every global batch is the same whatever the number of processes, so the final weights equal one
// process's up to float rounding, and the tests compare them (same_weights.py).
//
//   acc_cluster_trainer [--epochs N] [--weights_out PATH] [--checkpoint_dir DIR]
//                       [--fail_in_epoch E] [--step_sleep_ms M]
//
// --checkpoint_dir: the resume pattern of docs/launcher.md: save_state after every epoch, and at
//   start load the newest complete checkpoint if there is one (a restarted job continues).
// --fail_in_epoch E: in the job's first attempt (restart count 0), the last rank dies in the middle
//   of epoch E (1-based), as a machine or process failure would end it.
// --step_sleep_ms M: each step also sleeps M ms, so that a job lasts long enough to be cancelled.
#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include <acc/acc.h>

namespace {

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

struct Args {
  int epochs = 3;
  std::string weights_out;
  std::string checkpoint_dir;
  int fail_in_epoch = 0;
  int step_sleep_ms = 0;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "acc_cluster_trainer: " << flag << " needs a value\n";
      std::exit(2);
    }
    const std::string value = argv[++i];
    if (flag == "--epochs") args.epochs = std::stoi(value);
    else if (flag == "--weights_out") args.weights_out = value;
    else if (flag == "--checkpoint_dir") args.checkpoint_dir = value;
    else if (flag == "--fail_in_epoch") args.fail_in_epoch = std::stoi(value);
    else if (flag == "--step_sleep_ms") args.step_sleep_ms = std::stoi(value);
    else {
      std::cerr << "acc_cluster_trainer: unknown flag " << flag << "\n";
      std::exit(2);
    }
  }
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  const int64_t dataset_size = 1024, global_batch = 48, features = 16;  // 48: split over 1, 2, 3, 4 or 6 processes

  auto project = acc::ProjectConfiguration().project_dir(args.checkpoint_dir).automatic_checkpoint_naming(true);
  acc::Accelerator accelerator(acc::AcceleratorOptions().split_batches(true).project_config(project));

  torch::manual_seed(0);
  auto inputs = torch::randn({dataset_size, features});
  auto targets = torch::sin(inputs.matmul(torch::randn({features, 1}) / 4));
  auto loader = accelerator.prepare_data_loader(Rows(inputs, targets),
                                                torch::data::DataLoaderOptions(global_batch).drop_last(true));

  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(features, 64), torch::nn::Tanh(), torch::nn::Linear(64, 1));
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  accelerator.prepare(model, optimizer);

  // The resume pattern: the newest complete checkpoint, if any, holds the model, the optimizer, the
  // loader's position and the RNG states; one checkpoint per epoch numbers the epochs done.
  int first_epoch = 0;
  if (!args.checkpoint_dir.empty() && !acc::latest_checkpoint(args.checkpoint_dir).empty()) {
    const std::string from = accelerator.load_state();
    first_epoch = static_cast<int>(accelerator.save_iteration());
    accelerator.print("cluster_trainer: resumed from ", from, " at epoch ", first_epoch + 1);
  }

  const auto& launch = accelerator.state().launch();
  const bool fails_here = args.fail_in_epoch > 0 && launch.restart_count == 0 && accelerator.is_last_process();
  for (int epoch = first_epoch; epoch < args.epochs; ++epoch) {
    int step = 0;
    for (auto& batch : *loader) {
      if (fails_here && epoch + 1 == args.fail_in_epoch && step == 3) {
        std::fprintf(stderr, "cluster_trainer: rank %d fails in epoch %d as asked\n",
                     accelerator.process_index(), epoch + 1);
        std::_Exit(3);
      }
      optimizer.zero_grad();
      auto loss = torch::nn::functional::mse_loss(model->forward(batch.data), batch.target);
      accelerator.backward(loss);
      optimizer.step();
      if (args.step_sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(args.step_sleep_ms));
      ++step;
    }
    if (!args.checkpoint_dir.empty()) accelerator.save_state();
    accelerator.print("cluster_trainer: epoch ", epoch + 1, "/", args.epochs, " done");
  }

  if (accelerator.is_main_process() && !args.weights_out.empty()) {
    std::ofstream out(args.weights_out);
    out.precision(9);
    for (const auto& p : model->parameters()) {
      auto flat = p.detach().flatten();
      for (int64_t i = 0; i < flat.numel(); ++i) out << flat[i].item<float>() << "\n";
    }
  }
  accelerator.print("cluster_trainer: ", accelerator.num_processes(), " process(es), launcher ", launch.launcher,
                    ", job ", launch.job_id.empty() ? "-" : launch.job_id, ", done");
  accelerator.end_training();
  return 0;
}
