// Child program of the checkpoint tests (one rank when started by spawn_ranks).
//   save-loop <project>           saves automatic checkpoints forever (killed by the test); each
//                                 checkpoint's weights all equal its step number
//   verify <project>              load_state() of the newest complete checkpoint, checks it
//   train <dir> <K> <N> <out>     trains K steps, save_state(dir) inside the epoch's loop,
//                                 continues the same loop to N, writes the weights to out
//   train-kill <dir> <K>          trains K steps, save_state(dir) inside the loop, SIGKILLs itself
//   resume <dir> <N> <out>        load_state(dir), loops over the loader (which continues inside
//                                 the saved epoch) to N, writes the weights to out
//   uneven <dir> <S>              3 passes over a loader with even_batches(false), whose ranks get
//                                 different numbers of batches; save_state(dir) in pass 1 after
//                                 S batches of the loop (S = 0: after the loop); prints each batch
//   save-error <dir>              save_state(dir), which must fail: prints "CheckpointError: <what>"
//   uneven-resume <dir>           load_state(dir), then the passes left, printed the same way
// Exits 0 on success; prints "FAIL: ..." and exits 1 otherwise.
#include <torch/torch.h>

#include <csignal>
#include <cstdlib>
#include <functional>
#include <memory>
#include <iostream>
#include <string>

#include <acc/acc.h>

#include "../data/indices_dataset.h"
#include "worker_checks.h"

namespace {

using acc::testing::fail;

acc::AcceleratorOptions options(const std::string& project = "") {
  auto config = acc::ProjectConfiguration().project_dir(project);
  if (!project.empty()) config.automatic_checkpoint_naming(true).total_limit(3);
  return acc::AcceleratorOptions().cpu(true).project_config(config);
}

// A step counter registered for checkpointing through save/load members.
struct Counter {
  int64_t step = 0;
  void save(torch::serialize::OutputArchive& archive) const { archive.write("step", c10::IValue(step)); }
  void load(torch::serialize::InputArchive& archive) {
    c10::IValue value;
    archive.read("step", value);
    step = value.toInt();
  }
};

int save_loop(const std::string& project) {
  acc::Accelerator accelerator(options(project));
  // About 8 MB of weights plus Adam's 16 MB: a save takes long enough to be killed inside.
  auto model = torch::nn::Sequential(torch::nn::Linear(1024, 1024), torch::nn::Linear(1024, 1024));
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), 1e-3);
  Counter counter;
  accelerator.prepare(model, optimizer);
  accelerator.register_for_checkpointing(counter);
  // A restarted run continues from its newest checkpoint (and its numbering).
  if (!acc::latest_checkpoint(project).empty()) accelerator.load_state();
  for (;;) {
    ++counter.step;
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.fill_(static_cast<double>(counter.step));
    const auto dir = accelerator.save_state();
    std::cout << "saved " << dir << std::endl;
  }
}

int verify(const std::string& project) {
  acc::Accelerator accelerator(options(project));
  auto model = torch::nn::Sequential(torch::nn::Linear(1024, 1024), torch::nn::Linear(1024, 1024));
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), 1e-3);
  Counter counter;
  accelerator.prepare(model, optimizer);
  accelerator.register_for_checkpointing(counter);
  const auto dir = accelerator.load_state();
  for (auto& p : model->parameters()) {
    if (!torch::all(p == static_cast<double>(counter.step)).item<bool>()) {
      fail("checkpoint " + dir + " mixes weights of different saves (step " + std::to_string(counter.step) + ")");
    }
  }
  std::cout << "verified " << dir << " step " << counter.step << std::endl;
  return 0;
}

// --- exact resume --------------------------------------------------------------------------
// A model with dropout (global generator), shuffled data from a prepared loader (RandomSampler),
// Adam and a prepared StepLR scheduler. Only the step counter is registered: the loader's epoch
// and position come back from the checkpoint by themselves (no skip_first_batches here).
struct Samples : torch::data::datasets::Dataset<Samples> {
  torch::Tensor inputs, targets;
  torch::data::Example<> get(size_t index) override { return {inputs[index], targets[index]}; }
  std::optional<size_t> size() const override { return inputs.size(0); }
};

struct Run {
  acc::Accelerator accelerator{options()};
  torch::nn::Sequential model{torch::nn::Linear(8, 32), torch::nn::ReLU(), torch::nn::Dropout(0.3),
                              torch::nn::Linear(32, 1)};
  acc::Optimizer<torch::optim::Adam> optimizer{model->parameters(), 1e-2};
  acc::Scheduler<torch::optim::StepLR> scheduler{optimizer, 3, 0.5};
  static constexpr int64_t kSamples = 40, kBatch = 4;
  std::unique_ptr<acc::DataLoader<torch::data::datasets::MapDataset<Samples, torch::data::transforms::Stack<>>,
                                  torch::data::samplers::RandomSampler>>
      loader;
  int64_t step = 0;

  Run() {
    torch::manual_seed(1234);  // identical initial weights on every rank (also broadcast)
    for (auto& p : model->parameters()) {
      torch::NoGradGuard no_grad;
      p.uniform_(-0.3, 0.3);
    }
    auto data = torch::Generator(at::detail::createCPUGenerator(7));
    Samples samples;
    samples.inputs = torch::randn({kSamples, 8}, data);
    samples.targets = samples.inputs.sum(1, true).sin();
    accelerator.prepare(model, optimizer, scheduler);
    // Prepared after the generator has moved: its shuffle seed differs from the first run's
    // unless load_state restores it.
    torch::randn({3});
    loader = accelerator.prepare_data_loader(samples.map(torch::data::transforms::Stack<>()),
                                             torch::data::DataLoaderOptions(kBatch));
    accelerator.register_for_checkpointing(
        [this](torch::serialize::OutputArchive& archive) { archive.write("step", c10::IValue(step)); },
        [this](torch::serialize::InputArchive& archive) {
          c10::IValue value;
          archive.read("step", value);
          step = value.toInt();
        });
    acc::set_seed(99, /*device_specific=*/true);  // dropout masks differ per rank
  }

  // Trains up to `last_step`; at `save_step` (inside the epoch) calls `at_save`.
  void train_until(int64_t last_step, int64_t save_step = -1, const std::function<void()>& at_save = {}) {
    while (step < last_step) {
      for (auto& batch : *loader) {
        optimizer.zero_grad();
        auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
        accelerator.backward(loss);
        optimizer.step();
        scheduler.step();
        if (++step == save_step) at_save();
        if (step == last_step) break;
      }
    }
  }

  void write_weights(const std::string& out) {
    if (accelerator.is_main_process()) acc::safetensors::save_file(acc::model_state(*model), out);
    accelerator.wait_for_everyone();
  }
};

// --- resume with uneven ranks ------------------------------------------------------------------
// 9 samples in batches of 2 on 2 ranks: 5 batches dealt out in turn, so rank 0 has 3 (the last one
// short) and rank 1 has 2; nothing is cycled to even them out. Only the pass number is registered.
// Every batch, the end of every loop and the save are printed as lines the test compares: after
// "saved", the resumed run must print exactly what the uninterrupted run printed.
struct UnevenRun {
  acc::Accelerator accelerator{options().even_batches(false)};
  std::unique_ptr<acc::DataLoader<acc::testing::Indices, torch::data::samplers::RandomSampler>> loader;
  int64_t pass = 0;
  static constexpr int64_t kPasses = 3;

  UnevenRun() {
    loader = accelerator.prepare_data_loader(acc::testing::Indices(9), torch::data::DataLoaderOptions(2));
    accelerator.register_for_checkpointing(
        [this](torch::serialize::OutputArchive& archive) { archive.write("passes", c10::IValue(pass)); },
        [this](torch::serialize::InputArchive& archive) {
          c10::IValue value;
          archive.read("passes", value);
          pass = value.toInt();
        });
  }

  void run(int64_t save_after = -1, const std::string& dir = "") {
    for (; pass < kPasses; ++pass) {
      int64_t seen = 0;
      for (auto& batch : *loader) {
        std::cout << "batch " << pass << ":";
        for (auto index : acc::testing::as_indices(batch)) std::cout << ' ' << index;
        std::cout << std::endl;
        if (pass == 1 && ++seen == save_after) save(dir);
      }
      std::cout << "end " << pass << std::endl;
      if (pass == 1 && save_after == 0) {
        ++pass;  // the pass is over: a resumed run starts the next one
        save(dir);
        --pass;
      }
    }
  }

  void save(const std::string& dir) {
    accelerator.save_state(dir);
    std::cout << "saved" << std::endl;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "save-loop" && argc == 3) return save_loop(argv[2]);
    if (mode == "verify" && argc == 3) return verify(argv[2]);
    if ((mode == "train" && argc == 6) || (mode == "train-kill" && argc == 4)) {
      Run run;
      const int64_t k = std::stoll(argv[3]);
      const int64_t last = mode == "train" ? std::stoll(argv[4]) : k;
      run.train_until(last, k, [&] {
        run.accelerator.save_state(argv[2]);
        if (mode == "train-kill") std::raise(SIGKILL);
      });
      if (mode == "train") run.write_weights(argv[5]);
      return 0;
    }
    if (mode == "uneven" && argc == 4) {
      UnevenRun run;
      run.run(std::stoll(argv[3]), argv[2]);
      return 0;
    }
    if (mode == "uneven-resume" && argc == 3) {
      torch::randn({3});  // the loader draws another shuffle seed unless load_state restores it
      UnevenRun run;
      run.accelerator.load_state(argv[2]);
      run.run();
      return 0;
    }
    if (mode == "save-error" && argc == 3) {
      // save_state into a directory that cannot be written: prints the error's type and message.
      acc::Accelerator accelerator(options());
      auto model = torch::nn::Linear(2, 2);
      accelerator.prepare(model);
      try {
        accelerator.save_state(argv[2]);
        fail("save_state into '" + std::string(argv[2]) + "' succeeded");
      } catch (const acc::CheckpointError& error) {
        std::cout << "CheckpointError: " << error.what() << std::endl;
      }
      return 0;
    }
    if (mode == "resume" && argc == 5) {
      Run run;
      run.accelerator.load_state(argv[2]);
      run.train_until(std::stoll(argv[3]));
      run.write_weights(argv[4]);
      return 0;
    }
  } catch (const std::exception& error) {
    fail(error.what());
  }
  std::cerr << "usage: see the comment at the top of checkpoint_worker.cpp\n";
  return 2;
}
