// acc's side of bench/vs_accelerate (vs_accelerate.py runs it under acc-launch, and the same model,
// loop and data through Python Accelerate under torchrun). One rank of a training run: the model's
// initial weights and the data come from safetensors files the driver wrote once, so both sides
// start from the same numbers and see the same batches. Writes DIR/TAG_rank<R>.json: samples/s over
// the timed steps, peak RSS (VmHWM), seconds from BENCH_T0_NS (the driver's CLOCK_REALTIME before it
// started the launcher) to the end of the first optimizer step, the process's CPU time over the
// timed steps, and every step's loss.
//
// Usage: acc_bench_vs_accelerate DIR mlp|lm fp32|bf16 WARMUP STEPS GLOBAL_BATCH LR TAG
//
// The models compute what Python's compute, op for op: Linear layers on 3-D inputs are called as
// torch::linear (at::linear, what torch.nn.Linear calls; torch::nn::Linear's forward does
// matmul then `+= bias` there), and the optimizer is SGD (libtorch's Adam rounds differently from
// Python's). Under bf16 acc's autocast is on for the training thread from prepare() on (acc cannot
// wrap forward); the output is converted to float32 before the loss, as Accelerate's
// convert_outputs_to_fp32 does.
#include <torch/data/datasets/base.h>
#include <torch/data/example.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/sgd.h>

#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <acc/acc.h>

#include "memory.h"
#include "mlp.h"

namespace {

constexpr int64_t kMlpLayers = 16, kMlpWidth = 256;
constexpr int64_t kVocab = 2048, kSeq = 64, kDim = 256, kHeads = 4, kBlocks = 4;

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// CPU time of the whole process (every thread), what Python's time.process_time() reads.
double process_cpu_s() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

torch::Tensor linear(const torch::Tensor& x, const torch::nn::Linear& layer) {
  return torch::linear(x, layer->weight, layer->bias);
}

// bench/device/device_step.py's Block, as vs_accelerate.py defines it (same names, same order).
struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t dim, int64_t heads, int64_t hidden) : dim(dim), heads(heads) {
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    qkv = register_module("qkv", torch::nn::Linear(torch::nn::LinearOptions(dim, 3 * dim).bias(false)));
    out = register_module("out", torch::nn::Linear(dim, dim));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    up = register_module("up", torch::nn::Linear(dim, hidden));
    down = register_module("down", torch::nn::Linear(hidden, dim));
  }
  torch::Tensor forward(const torch::Tensor& input) {
    const auto b = input.size(0), t = input.size(1);
    auto parts = linear(norm1->forward(input), qkv).view({b, t, 3, heads, dim / heads}).permute({2, 0, 3, 1, 4});
    auto scores = torch::matmul(parts[0], parts[1].transpose(-2, -1)) / std::sqrt(double(dim / heads));
    auto mask = torch::ones({t, t}, input.options().dtype(torch::kBool)).triu(1);
    auto attended =
        torch::matmul(scores.masked_fill(mask, -std::numeric_limits<double>::infinity()).softmax(-1), parts[2]);
    auto x = input + linear(attended.permute({0, 2, 1, 3}).reshape({b, t, dim}), out);
    return x + linear(torch::gelu(linear(norm2->forward(x), up)), down);
  }
  int64_t dim, heads;
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear qkv{nullptr}, out{nullptr}, up{nullptr}, down{nullptr};
};
TORCH_MODULE(Block);

struct LmImpl : torch::nn::Module {
  LmImpl() {
    embed = register_module("embed", torch::nn::Embedding(kVocab, kDim));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < kBlocks; ++i) blocks->push_back(Block(kDim, kHeads, 4 * kDim));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})));
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(kDim, kVocab).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& tokens) {
    auto x = embed->forward(tokens);
    for (const auto& block : *blocks) x = block->as<BlockImpl>()->forward(x);
    return linear(norm->forward(x), head);
  }
  torch::nn::Embedding embed{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Lm);

// Batches are rows of in-memory tensors, one index_select per batch (examples/demo's Rows). For the
// LM, `x` holds SEQ + 1 tokens per row: inputs are the first SEQ, targets the last SEQ.
class Rows : public torch::data::datasets::BatchDataset<Rows, torch::data::Example<>> {
 public:
  Rows(torch::Tensor x, torch::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  torch::data::Example<> get_batch(c10::ArrayRef<size_t> indices) override {
    auto index = torch::tensor(std::vector<int64_t>(indices.begin(), indices.end()));
    auto x = x_.index_select(0, index);
    if (!y_.defined()) return {x.narrow(1, 0, kSeq), x.narrow(1, 1, kSeq)};
    return {x, y_.index_select(0, index)};
  }
  std::optional<size_t> size() const override { return x_.size(0); }

 private:
  torch::Tensor x_, y_;
};

template <typename Model>
int train(acc::Accelerator& accelerator, Model model, const std::string& dir, const std::string& name,
          int warmup, int steps, int64_t global_batch, double lr, const std::string& tag,
          int64_t t0_ns) {
  const bool lm = name == "lm";
  acc::load_checkpoint_in_model(model, dir + "/init_" + name + ".safetensors");
  acc::safetensors::MappedFile data(dir + "/data_" + name + ".safetensors");
  // Copies: the mapping's pages would otherwise count in RSS only as they are touched.
  auto x = data.tensor("x").clone();
  auto y = lm ? torch::Tensor() : data.tensor("y").clone();

  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), torch::optim::SGDOptions(lr));
  accelerator.prepare(model, optimizer);
  auto loader = accelerator.prepare_data_loader<torch::data::samplers::SequentialSampler>(
      Rows(x, y), torch::data::DataLoaderOptions(global_batch / accelerator.num_processes()));

  std::vector<double> losses;
  int64_t first_step_ns = 0;
  auto start = std::chrono::steady_clock::now();
  double start_cpu = process_cpu_s();
  for (auto& batch : *loader) {
    if (static_cast<int>(losses.size()) == warmup) {
      start = std::chrono::steady_clock::now();
      start_cpu = process_cpu_s();
    }
    optimizer.zero_grad();
    torch::Tensor output = model->forward(batch.data).to(torch::kFloat);
    torch::Tensor loss = lm ? torch::nn::functional::cross_entropy(output.reshape({-1, kVocab}), batch.target.reshape({-1}))
                   : torch::nn::functional::mse_loss(output, batch.target);
    accelerator.backward(loss);
    optimizer.step();
    losses.push_back(loss.item<double>());
    if (losses.size() == 1) first_step_ns = realtime_ns();
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = process_cpu_s() - start_cpu;
  if (static_cast<int>(losses.size()) != warmup + steps) {
    std::fprintf(stderr, "vs_accelerate: %zu steps, expected %d\n", losses.size(), warmup + steps);
    return 1;
  }
  const auto path = dir + "/" + tag + "_rank" + std::to_string(accelerator.process_index()) + ".json";
  FILE* file = std::fopen(path.c_str(), "w");
  if (file == nullptr) {
    std::perror(path.c_str());
    return 1;
  }
  std::fprintf(file,
               "{\"rank\": %d, \"world\": %d, \"samples_per_s\": %.6f, \"cpu_s\": %.6f, \"peak_rss_mib\": %.3f, "
               "\"first_step_s\": %.6f, \"losses\": [",
               static_cast<int>(accelerator.process_index()), static_cast<int>(accelerator.num_processes()),
               static_cast<double>(global_batch) * steps / elapsed, cpu, acc::bench::peak_rss_mb(),
               static_cast<double>(first_step_ns - t0_ns) / 1e9);
  for (size_t i = 0; i < losses.size(); ++i) std::fprintf(file, "%s%.17g", i ? ", " : "", losses[i]);
  std::fprintf(file, "]}\n");
  std::fclose(file);
  accelerator.end_training();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 9) {
    std::fprintf(stderr, "usage: %s DIR mlp|lm fp32|bf16 WARMUP STEPS GLOBAL_BATCH LR TAG\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1], name = argv[2], precision = argv[3], tag = argv[8];
  const char* t0 = std::getenv("BENCH_T0_NS");
  const int64_t t0_ns = t0 != nullptr ? std::atoll(t0) : realtime_ns();
  if ((name != "mlp" && name != "lm") || (precision != "fp32" && precision != "bf16")) {
    std::fprintf(stderr, "vs_accelerate: model must be mlp or lm, precision fp32 or bf16\n");
    return 2;
  }
  acc::Accelerator accelerator(acc::AcceleratorOptions().cpu(true).mixed_precision(
      precision == "bf16" ? acc::MixedPrecision::BF16 : acc::MixedPrecision::NO));
  const int warmup = std::atoi(argv[4]), steps = std::atoi(argv[5]);
  const int64_t global_batch = std::atoll(argv[6]);
  const double lr = std::atof(argv[7]);
  if (name == "lm") return train(accelerator, Lm(), dir, name, warmup, steps, global_batch, lr, tag, t0_ns);
  return train(accelerator, acc::bench::make_tanh_mlp(kMlpLayers, kMlpWidth), dir, name, warmup, steps,
               global_batch, lr, tag, t0_ns);
}
