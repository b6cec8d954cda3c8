// acc-selftest: the program `acc-test` launches on every rank (Accelerate's `accelerate test`
// script for acc). Each check prints one line; the first failing check names itself on every rank
// that saw it and the program exits 1. Runs the same on one process.
#include <torch/data/datasets/base.h>
#include <torch/data/samplers/random.h>
#include <torch/data/samplers/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <thread>

#include <acc/acc.h>

namespace {

struct CheckFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void require(bool condition, const std::string& what) {
  if (!condition) throw CheckFailed(what);
}

void check_process_state(acc::Accelerator& accelerator) {
  auto ranks = accelerator.gather(torch::tensor({static_cast<int64_t>(accelerator.process_index())}));
  require(torch::equal(ranks, torch::arange(accelerator.num_processes())),
          "every rank must have a distinct process index in 0..num_processes-1");
  auto locals = accelerator.gather(torch::tensor({static_cast<int64_t>(accelerator.is_local_main_process())}));
  require(locals.sum().item<int64_t>() >= 1, "there must be a local main process");
}

void check_main_process_first(acc::Accelerator& accelerator) {
  // One marker file per machine in the shared $TMPDIR. Its name is a random token from rank 0 that
  // nobody else can guess, and it is created exclusively without following links, so a file or
  // link another user planted is never written through (a predictable name was).
  std::random_device random;
  const int64_t token = (static_cast<int64_t>(random() >> 1) << 31) ^ random();
  const auto shared = accelerator.broadcast(torch::tensor({token})).item<int64_t>();
  // Machines that share a $TMPDIR (two on one host) each get their own, named after their local
  // main's rank (ranks are numbered machine by machine).
  const int local_main = accelerator.process_index() - accelerator.local_process_index();
  char name[80];
  std::snprintf(name, sizeof(name), "acc-selftest-%016llx-%d", static_cast<unsigned long long>(shared),
                local_main);
  const auto marker = std::filesystem::temp_directory_path() / name;
  {
    auto guard = accelerator.local_main_process_first();
    if (accelerator.is_local_main_process()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      require(fd >= 0, "could not create the marker " + marker.string() + " exclusively (" +
                           std::strerror(errno) + "); is something already there?");
      ::close(fd);
    } else {
      require(std::filesystem::exists(marker),
              "local_main_process_first let a process in before the local main process");
    }
  }
  accelerator.wait_for_everyone();
  if (accelerator.is_local_main_process()) std::filesystem::remove(marker);
}

void check_split_between_processes(acc::Accelerator& accelerator) {
  const int64_t total = 3 * accelerator.num_processes() + 1;
  auto share = accelerator.split_between_processes(torch::arange(total));
  auto sizes = accelerator.gather(torch::tensor({share.size(0)}));
  auto padded = accelerator.pad_across_processes(share, 0, -1);
  auto all = accelerator.gather(padded);
  auto kept = all.masked_select(all.ge(0));
  require(sizes.sum().item<int64_t>() == total && torch::equal(kept, torch::arange(total)),
          "split_between_processes must cover every item once, in order");
}

void check_rng_sync(acc::Accelerator& accelerator) {
  acc::set_seed(1234);
  auto same = accelerator.gather(torch::rand({1, 4}));
  for (int64_t r = 1; r < same.size(0); ++r) {
    require(torch::equal(same[r], same[0]), "set_seed(seed) must give every rank the same numbers");
  }
  acc::set_seed(1234, /*device_specific=*/true);
  auto different = accelerator.gather(torch::rand({1, 4}));
  for (int64_t r = 1; r < different.size(0); ++r) {
    require(!torch::equal(different[r], different[0]),
            "set_seed(seed, device_specific=true) must give ranks different numbers");
  }
}

void check_collectives(acc::Accelerator& accelerator) {
  const int n = accelerator.num_processes();
  auto one = torch::ones({1});
  require(accelerator.reduce(one, "sum").item<float>() == n, "reduce(sum)");
  require(accelerator.reduce(one, "mean").item<float>() == 1, "reduce(mean)");
  auto rank = torch::tensor({static_cast<float>(accelerator.process_index())});
  require(accelerator.reduce(rank, "max").item<float>() == n - 1, "reduce(max)");
  require(accelerator.broadcast(rank, n - 1).item<float>() == n - 1, "broadcast from the last rank");
}

// Accelerate's training check: a regression model trained under DDP equals the same model trained
// on one process over the whole data (3 epochs of SGD).
void check_training_equivalence(acc::Accelerator& /*configured*/) {
  // In full precision whatever the config's mixed precision: a bf16 forward cannot equal the float32
  // baseline to 1e-5 (the config's precision has its own check below). Accelerate's own training
  // check gets away with the configured precision only because its model, a * x + b, has no op that
  // autocast lowers.
  acc::Accelerator accelerator(acc::AcceleratorOptions().mixed_precision(acc::MixedPrecision::NO));
  const int n = accelerator.num_processes(), rank = accelerator.process_index();
  const int64_t per_rank_batch = 4, steps_per_epoch = 8;
  torch::manual_seed(42);
  auto x = torch::randn({n * per_rank_batch * steps_per_epoch, 1});
  auto y = 2 * x + 3 + 0.1 * torch::randn_like(x);

  auto make = [] {
    torch::manual_seed(0);
    return torch::nn::Linear(1, 1);
  };
  auto model = make(), baseline = make();
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
  torch::optim::SGD baseline_optimizer(baseline->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int64_t s = 0; s < steps_per_epoch; ++s) {
      auto global = torch::arange(s * n * per_rank_batch, (s + 1) * n * per_rank_batch);
      auto mine = global.narrow(0, rank * per_rank_batch, per_rank_batch);
      optimizer.zero_grad();
      accelerator.backward(torch::mse_loss(model->forward(x.index_select(0, mine).to(accelerator.device())),
                                           y.index_select(0, mine).to(accelerator.device())));
      optimizer.step();
      baseline_optimizer.zero_grad();
      torch::mse_loss(baseline->forward(x.index_select(0, global)), y.index_select(0, global)).backward();
      baseline_optimizer.step();
    }
  }
  for (size_t i = 0; i < model->parameters().size(); ++i) {
    auto diff = (model->parameters()[i].cpu() - baseline->parameters()[i]).abs().max().item<double>();
    require(diff < 1e-5, "DDP training must equal single-process training (difference " +
                             std::to_string(diff) + ")");
  }
}

// A dataset whose samples are their own indices.
class Indices : public torch::data::datasets::Dataset<Indices, int64_t> {
 public:
  explicit Indices(int64_t size) : size_(size) {}
  int64_t get(size_t index) override { return static_cast<int64_t>(index); }
  std::optional<size_t> size() const override { return size_; }

 private:
  int64_t size_;
};

// Accelerate's loader check: gathered over ranks, the prepared loader's batches are the data set,
// every sample once (shuffled or not, split or not).
template <typename Sampler>
void check_sharding(acc::Accelerator& accelerator, bool split_batches, const std::string& what) {
  const int64_t n = 32 * accelerator.num_processes();
  acc::Accelerator sharding(acc::AcceleratorOptions().split_batches(split_batches));
  const size_t batch = split_batches ? 4 * accelerator.num_processes() : 4;
  auto loader = sharding.template prepare_data_loader<Sampler>(Indices(n), batch);
  std::vector<torch::Tensor> seen;
  for (auto& samples : *loader) {
    seen.push_back(accelerator.gather(torch::tensor(samples, torch::kLong)));
  }
  auto all = torch::cat(seen);
  require(torch::equal(std::get<0>(all.sort()), torch::arange(n)),
          what + ": the ranks' batches together must be arange(" + std::to_string(n) + ")");
}

void check_data_loader(acc::Accelerator& accelerator) {
  check_sharding<torch::data::samplers::SequentialSampler>(accelerator, false, "unshuffled loader");
  check_sharding<torch::data::samplers::RandomSampler>(accelerator, false, "shuffled loader");
  check_sharding<torch::data::samplers::SequentialSampler>(accelerator, true, "split batches");
}

// A short bf16 run (autocast on the training thread): it trains, in bf16, with fp32 weights.
void check_bf16(acc::Accelerator& accelerator) {
  acc::Accelerator bf16(acc::AcceleratorOptions().mixed_precision(acc::MixedPrecision::BF16));
  torch::manual_seed(0);
  auto model = torch::nn::Linear(8, 1);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
  bf16.prepare(model, optimizer);
  auto x = torch::randn({32, 8}).to(accelerator.device());
  auto y = x.sum(1, true);
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    optimizer.zero_grad();
    auto out = model->forward(x);
    require(out.scalar_type() == torch::kBFloat16, "bf16: forward must run in bfloat16");
    auto loss = torch::mse_loss(out, y);
    bf16.backward(loss);
    optimizer.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  require(std::isfinite(last) && last < first, "bf16: the loss must go down");
  require(model->weight.scalar_type() == torch::kFloat, "bf16: weights must stay float32");
}

void check_trigger(acc::Accelerator& accelerator) {
  if (accelerator.is_last_process()) accelerator.set_trigger();
  require(accelerator.check_trigger(), "check_trigger must see the last process's trigger");
  require(!accelerator.check_trigger(), "check_trigger must reset the flag");
}

}  // namespace

int main() {
  try {
    acc::Accelerator accelerator;
    accelerator.print("acc-selftest: ", accelerator.num_processes(), " process(es), ",
                      acc::to_string(accelerator.distributed_type()), ", device ", accelerator.device());
    const std::vector<std::pair<const char*, std::function<void(acc::Accelerator&)>>> checks{
        {"process state", check_process_state},
        {"main_process_first ordering", check_main_process_first},
        {"split_between_processes", check_split_between_processes},
        {"RNG synchronisation", check_rng_sync},
        {"collectives", check_collectives},
        {"data loader sharding", check_data_loader},
        {"training equivalence (DDP vs one process)", check_training_equivalence},
        {"trigger", check_trigger},
        {"bf16 training", check_bf16},
    };
    for (const auto& [name, check] : checks) {
      try {
        check(accelerator);
      } catch (const CheckFailed& e) {
        std::cout << "FAILED: " << name << ": " << e.what() << std::endl;
        return 1;
      }
      accelerator.print("ok: ", name);
    }
    accelerator.end_training();
  } catch (const std::exception& e) {
    std::cout << "FAILED: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
