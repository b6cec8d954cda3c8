// What only a GPU can show, one check at a time, for scripts/device-check. Each check prints one line
//   PASS|FAIL|SKIP <name>: <what it measured, or why>
// and the program exits 1 when any check failed. Without CUDA every check says SKIP and why (a CTest
// runs it so on CPU, which keeps the program and its output honest between GPU loans).
//
//   acc_device_checks [check...]       the one-process checks (all, or those named)
//   acc_device_checks ddp|fsdp_offload|nccl_shared_gpu
//                                      one rank of the two-rank runs scripts/device-check starts on
//                                      one GPU (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT set)
#include <torch/cuda.h>
#include <torch/data/samplers/sequential.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <acc/acc.h>

#include "checkpoint/file_io.h"
#include "comm/process_group.h"
#include "regression_data.h"

namespace fs = std::filesystem;

namespace {

int failures = 0;

// Runs `check`, which returns what it measured and throws (std::exception) when something is wrong.
void run(const std::string& name, const std::function<std::string()>& check) {
  if (!torch::cuda::is_available()) {
    std::printf("SKIP %s: no CUDA device here (torch::cuda::is_available() is false)\n", name.c_str());
    return;
  }
  try {
    std::printf("PASS %s: %s\n", name.c_str(), check().c_str());
  } catch (const std::exception& error) {
    ++failures;
    std::printf("FAIL %s: %s\n", name.c_str(), acc::detail::error_text(error).c_str());
  }
  std::fflush(stdout);
}

void require(bool condition, const std::string& what) {
  if (!condition) throw std::runtime_error(what);
}

std::string fmt(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

double max_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, (a[i].cpu().to(torch::kDouble) - b[i].cpu().to(torch::kDouble)).abs().max().item<double>());
  }
  return worst;
}

std::vector<torch::Tensor> detached_copies(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.detach().clone());
  return out;
}

// A scratch directory removed at scope exit, through acc's remove_tree: libtorch.so exports its own
// std::filesystem::remove_all, which jumps to a null pointer on a non-empty directory when it
// interposes on libstdc++'s (it did on the first GPU run: checkpoint/file_io.h).
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("acc-device-checks-" + std::to_string(::getpid()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() { acc::detail::remove_tree(path.string()); }
};

torch::nn::Sequential mlp(int64_t width, int64_t layers) {
  torch::nn::Sequential model;
  for (int64_t i = 0; i < layers; ++i) {
    model->push_back(torch::nn::Linear(width, width));
    model->push_back(torch::nn::ReLU());
  }
  return model;
}

// NCCL, built in, on a one-rank group: every collective acc sends to NCCL, on cuda:0.
std::string nccl_one_rank() {
  acc::LaunchInfo launch;
  launch.launcher = "env";
  launch.master_port = 0;  // one rank: any free port
  acc::detail::ProcessGroup group(launch, acc::detail::CudaCollectives::kNccl, std::chrono::seconds(60));
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  auto x = torch::arange(8, cuda.dtype(torch::kFloat));
  const auto expected = x.clone();
  group.all_reduce_(x, c10d::ReduceOp::SUM, "all_reduce");
  group.broadcast_(x, 0, "broadcast");
  auto gathered = group.all_gather(x, "all_gather");
  require(gathered.size() == 1 && torch::equal(gathered[0], expected), "all_gather changed the tensor");
  auto output = torch::empty_like(x);
  group.reduce_scatter_flat(output, x.clone())->wait();
  group.all_gather_flat(output)->wait();
  require(torch::equal(x, expected) && torch::equal(output, expected),
          "a one-rank collective changed the tensor");
  return "all_reduce, broadcast, all_gather, reduce_scatter_flat and all_gather_flat through NCCL on " +
         x.device().str();
}

// torch.amp.GradScaler's algorithm on CUDA tensors (ATen's _amp_* kernels), then through the
// Accelerator: a step with an inf gradient is skipped and the scale backs off.
std::string grad_scaler_fp16() {
  acc::GradScaler scaler(acc::GradScalerKwargs().growth_interval(2), torch::Device(torch::kCUDA, 0));
  auto weight = torch::ones({4}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
  torch::optim::SGD plain({weight}, 0.1);
  scaler.scale(weight.sum()).backward();
  scaler.unscale_(plain);
  require(!scaler.found_inf(plain) && torch::equal(weight.grad().cpu(), torch::ones({4})),
          "unscale_ must divide the scaled gradient back to 1 (got " + fmt(weight.grad()[0].item<double>()) + ")");
  scaler.update();
  plain.zero_grad();
  scaler.scale(weight.sum()).backward();
  scaler.unscale_(plain);
  scaler.update();
  require(scaler.get_scale() == 131072.0, "two clean steps with growth_interval 2 must double the scale, got " +
                                              fmt(scaler.get_scale()));

  acc::Accelerator accelerator(acc::AcceleratorOptions().mixed_precision(acc::MixedPrecision::FP16));
  torch::manual_seed(0);
  auto model = torch::nn::Linear(16, 4);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  auto x = torch::randn({8, 16}, torch::TensorOptions().device(accelerator.device()));
  auto step = [&](double factor) {
    optimizer.zero_grad();
    torch::Tensor loss;
    {
      auto autocast = accelerator.autocast();
      loss = model->forward(x).pow(2).mean() * factor;
    }
    accelerator.backward(loss);
    optimizer.step();
  };
  auto before = detached_copies(model->parameters());
  step(1.0);
  require(!accelerator.optimizer_step_was_skipped() && max_difference(before, model->parameters()) > 0,
          "a clean fp16 step must update the weights");
  before = detached_copies(model->parameters());
  step(std::numeric_limits<double>::infinity());
  require(accelerator.optimizer_step_was_skipped(), "a step with inf gradients must be skipped");
  require(max_difference(before, model->parameters()) == 0, "a skipped step must leave the weights alone");
  return "unscale/growth on CUDA; through the Accelerator an inf step was skipped, weights unchanged";
}

// Batches reach the GPU through pinned staging and non-blocking copies, equal to the dataset.
std::string pinned_loader() {
  acc::Accelerator accelerator;
  const auto x = torch::randn({64, 32}), y = torch::randn({64, 1});
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      acc::testing::Regression(x, y), 16);
  int64_t seen = 0;
  for (auto& batch : *loader) {
    for (auto& example : batch) {
      require(example.data.is_cuda() && example.target.is_cuda(),
              "a batch arrived on " + example.data.device().str() + ", not the GPU");
      require(torch::equal(example.data.cpu(), x[seen]) && torch::equal(example.target.cpu(), y[seen]),
              "sample " + std::to_string(seen) + " differs from the dataset after the copy");
      ++seen;
    }
  }
  require(seen == 64, "the loader gave " + std::to_string(seen) + " samples, not 64");
  return "64 samples in 4 batches on " + accelerator.device().str() + ", each equal to the dataset";
}

// save_state keeps the CUDA generator: draws after load_state repeat the draws after save_state.
std::string cuda_rng_state() {
  ScratchDir scratch;
  acc::Accelerator accelerator;
  torch::manual_seed(7);
  const auto cuda = torch::TensorOptions().device(accelerator.device());
  torch::randn({16}, cuda);  // move the generator off its seed
  accelerator.save_state((scratch.path / "state").string());
  const auto first = torch::randn({1024}, cuda);
  const auto moved_on = torch::randn({1024}, cuda);
  require(!torch::equal(first, moved_on), "consecutive CUDA draws must differ");
  accelerator.load_state((scratch.path / "state").string());
  const auto again = torch::randn({1024}, cuda);
  require(torch::equal(first, again), "draws after load_state differ from those after save_state");
  return "1024 normal draws on " + accelerator.device().str() + " repeated exactly after load_state";
}

// Big-model inference with a GPU: the GPU's free memory counts, an "auto"-style map splits the model
// over cuda:0, the CPU and disk, and the dispatched model computes what the model all on the GPU does.
std::string big_model_dispatch() {
  ScratchDir scratch;
  const auto memory = acc::get_max_memory();
  require(!memory.empty() && memory[0].first == "cuda:0" && memory[0].second > (1ULL << 30),
          "get_max_memory() must list cuda:0 first with its free memory");
  torch::manual_seed(0);
  auto reference = mlp(512, 8);
  auto dispatched = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(reference->clone());
  reference->to(torch::kCUDA);
  const uint64_t layer = (512 * 512 + 512) * sizeof(float);
  auto map = acc::infer_auto_device_map(
      *dispatched, acc::AutoDeviceMapOptions().max_memory({{"cuda:0", 3 * layer + 1024}, {"cpu", 3 * layer + 1024}, {"disk", 1ULL << 40}}));
  const auto devices = map.devices();
  require(devices.size() == 3, "the map must use cuda:0, cpu and disk:\n" + [&] {
    std::ostringstream out;
    out << map;
    return out.str();
  }());
  acc::dispatch_model(*dispatched, map, acc::DispatchOptions().offload_folder((scratch.path / "offload").string()));
  const auto x = torch::randn({4, 512}, torch::TensorOptions().device(torch::kCUDA));
  torch::NoGradGuard no_grad;
  const auto expected = reference->forward(x);
  const auto got = dispatched->forward(x);
  require(got.is_cuda(), "the dispatched model's output is on " + got.device().str());
  const double diff = (got - expected).abs().max().item<double>();
  require(diff == 0, "the dispatched model differs from the model on the GPU by " + fmt(diff));
  return "get_max_memory() cuda:0 " + fmt(memory[0].second / double(1ULL << 30)) +
         " GiB free; 8 layers over cuda:0/cpu/disk equal the all-GPU model bit for bit";
}

// One rank of a two-rank run on one GPU. NCCL cannot put two ranks on one GPU: with the default
// backend the Accelerator must refuse at once, naming both ranks and the fix.
int nccl_shared_gpu_rank() {
  const char* rank = std::getenv("RANK") ? std::getenv("RANK") : "?";
  try {
    acc::Accelerator accelerator(acc::AcceleratorOptions().timeout(std::chrono::seconds(60)));
    std::printf("FAIL nccl_shared_gpu (rank %s): two ranks on one GPU started NCCL on %s\n", rank,
                accelerator.device().str().c_str());
    return 1;
  } catch (const acc::DistributedError& error) {
    const std::string text = acc::detail::error_text(error);
    const bool named = text.find("ranks 0 (cuda:0) and 1 (cuda:0) share GPU-") != std::string::npos &&
                       text.find("backend(\"gloo\")") != std::string::npos;
    std::printf("%s nccl_shared_gpu (rank %s): %s\n", named ? "PASS" : "FAIL", rank, text.c_str());
    return named ? 0 : 1;
  }
}

// One rank of a two-rank run on one GPU through Gloo's CUDA path: DDP, or FSDP FULL_SHARD with
// offload_params. The ranks' model must equal one process trained on the global batch.
int distributed_rank(const std::string& mode) {
  if (mode == "nccl_shared_gpu") return nccl_shared_gpu_rank();
  acc::AcceleratorOptions options;
  options.timeout(std::chrono::seconds(60)).backend("gloo");
  if (mode == "fsdp_offload") {
    options.fsdp_plugin(acc::FullyShardedDataParallelPlugin()
                            .sharding_strategy(acc::ShardingStrategy::FULL_SHARD)
                            .offload_params(true));
  }
  const std::string name = mode + "_two_ranks_one_gpu";
  try {
    acc::Accelerator accelerator(options);
    const auto device = accelerator.device();
    const int n = accelerator.num_processes(), rank = accelerator.process_index();
    torch::manual_seed(0);
    auto model = mlp(64, 3);
    auto baseline = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model->clone());
    baseline->to(device);
    acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.05);
    torch::optim::SGD baseline_optimizer(baseline->parameters(), 0.05);
    accelerator.prepare(model, optimizer);
    torch::manual_seed(1);
    const int64_t per_rank = 8;
    for (int step = 0; step < 5; ++step) {
      auto x = torch::randn({n * per_rank, 64}).to(device), y = torch::randn({n * per_rank, 64}).to(device);
      optimizer.zero_grad();
      accelerator.backward(torch::mse_loss(model->forward(x.narrow(0, rank * per_rank, per_rank)),
                                           y.narrow(0, rank * per_rank, per_rank)));
      optimizer.step();
      baseline_optimizer.zero_grad();
      torch::mse_loss(baseline->forward(x), y).backward();
      baseline_optimizer.step();
    }
    double diff = 0;
    {
      auto full = accelerator.summon_full_params(model, /*writeback=*/false);
      diff = max_difference(model->parameters(), baseline->parameters());
    }
    require(diff < 1e-5, "differs from one process on the global batch by " + fmt(diff));
    if (rank == 0) {
      std::printf("PASS %s: %s on %s, 5 SGD steps equal one process within %s\n", name.c_str(),
                  acc::to_string(accelerator.distributed_type()).c_str(), device.str().c_str(), fmt(diff).c_str());
    }
    return 0;
  } catch (const std::exception& error) {
    std::printf("FAIL %s (rank %s): %s\n", name.c_str(), std::getenv("RANK") ? std::getenv("RANK") : "?",
                acc::detail::error_text(error).c_str());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::pair<std::string, std::function<std::string()>>> checks{
      {"nccl_one_rank", nccl_one_rank},   {"grad_scaler_fp16", grad_scaler_fp16},
      {"pinned_loader", pinned_loader},   {"cuda_rng_state", cuda_rng_state},
      {"big_model_dispatch", big_model_dispatch}};
  std::vector<std::string> wanted(argv + 1, argv + argc);
  if (wanted.size() == 1 && (wanted[0] == "ddp" || wanted[0] == "fsdp_offload" || wanted[0] == "nccl_shared_gpu")) {
    return distributed_rank(wanted[0]);
  }
  for (const auto& name : wanted) {
    if (std::none_of(checks.begin(), checks.end(), [&](const auto& check) { return check.first == name; })) {
      std::fprintf(stderr, "acc_device_checks: no check '%s'; the checks:", name.c_str());
      for (const auto& check : checks) std::fprintf(stderr, " %s", check.first.c_str());
      std::fprintf(stderr, " (or ddp, fsdp_offload, nccl_shared_gpu: one rank of a two-rank run)\n");
      return 2;
    }
  }
  for (const auto& [name, check] : checks) {
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), name) != wanted.end()) run(name, check);
  }
  return failures == 0 ? 0 : 1;
}
