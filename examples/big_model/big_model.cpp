// acc's big-model inference demo (Accelerate's big_modeling): a small GPT-like model is built with
// acc::init_empty_weights (no weight memory), a sharded safetensors checkpoint is loaded into it with
// acc::load_checkpoint_and_dispatch under a CPU memory limit small enough that the later blocks stay
// on disk (memory-mapped from the checkpoint's own files, paged in around each block's forward), and
// a few tokens are generated greedily. The first run writes the checkpoint (a normally built model,
// fixed seed) and checks that the dispatched model generates the same tokens as that model did.
//
//   acc-demo-big-model [--checkpoint DIR] [--max-cpu-memory SIZE] [--tokens N]
#include <torch/nn/functional/activation.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <acc/big_modeling.h>
#include <acc/checkpoint_model.h>
#include <acc/device_map.h>
#include <acc/errors.h>
#include <acc/hooks.h>

namespace demo {

// ~26 MB of fp32 weights: 8 blocks of ~3.2 MB, embeddings and head of ~0.5 MB each.
struct Config {
  int64_t vocab = 512, positions = 128, dim = 256, heads = 4, hidden = 1024, blocks = 8;
};

// A pre-norm transformer block: causal self-attention, then an MLP, each with a residual.
struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const Config& config) : dim(config.dim), heads(config.heads) {
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    qkv = register_module("qkv", torch::nn::Linear(dim, 3 * dim));
    out = register_module("out", torch::nn::Linear(dim, dim));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    up = register_module("up", torch::nn::Linear(dim, config.hidden));
    down = register_module("down", torch::nn::Linear(config.hidden, dim));
  }

  torch::Tensor forward(torch::Tensor x) {
    // The forward seam: a block whose weights rest on disk is paged in here and released when the
    // scope ends; given `x`, dispatch may also move the input to the block's execution device.
    acc::ForwardHooksGuard forward_hooks(*this, x);
    const auto b = x.size(0), t = x.size(1), head_dim = dim / heads;
    auto parts = qkv->forward(norm1->forward(x)).view({b, t, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
    auto scores = torch::matmul(parts[0], parts[1].transpose(-2, -1)) / std::sqrt(double(head_dim));
    auto mask = torch::ones({t, t}, x.options().dtype(torch::kBool)).triu(1);
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    auto attended = torch::matmul(scores.softmax(-1), parts[2]).permute({0, 2, 1, 3}).reshape({b, t, dim});
    x = x + out->forward(attended);
    return x + down->forward(torch::gelu(up->forward(norm2->forward(x))));
  }

  int64_t dim, heads;
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::Linear qkv{nullptr}, out{nullptr}, up{nullptr}, down{nullptr};
};
TORCH_MODULE(Block);

// The root calls its blocks from a ModuleList, not through a torch::nn::Sequential: the forward
// needs more than a chain of one-tensor calls (token + position embeddings, and a real model
// would pass masks or a KV cache to each block), and the checkpoint's names read as Hugging Face
// models' do ("blocks.3.qkv.weight"). acc does not see the calls a custom root makes, which is why
// every block opens acc::ForwardHooksGuard itself; the guard would be harmless (run once) under a
// Sequential too. The embeddings, the final norm and the head are built-in modules the root calls
// directly: where the map puts them on disk they stay memory-mapped, which is fine for the CPU.
struct GptImpl : torch::nn::Module {
  explicit GptImpl(const Config& config) {
    tokens = register_module("tokens", torch::nn::Embedding(config.vocab, config.dim));
    positions = register_module("positions", torch::nn::Embedding(config.positions, config.dim));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < config.blocks; ++i) blocks->push_back(Block(config));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.dim})));
    head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(config.dim, config.vocab).bias(false)));
  }

  // ids [batch, t] -> logits [batch, t, vocab]
  torch::Tensor forward(const torch::Tensor& ids) {
    auto x = tokens->forward(ids) + positions->forward(torch::arange(ids.size(1), ids.options()));
    for (const auto& block : *blocks) x = block->as<BlockImpl>()->forward(x);
    return head->forward(norm->forward(x));
  }

  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(Gpt);

// Greedy decoding without a KV cache: the whole sequence runs again for every new token.
std::vector<int64_t> generate(Gpt& model, const std::vector<int64_t>& prompt, int tokens) {
  torch::NoGradGuard no_grad;
  auto ids = torch::tensor(prompt, torch::kLong).unsqueeze(0);
  std::vector<int64_t> generated;
  for (int i = 0; i < tokens; ++i) {
    const auto next = model->forward(ids).select(1, ids.size(1) - 1).argmax(-1);  // [1]
    generated.push_back(next.item<int64_t>());
    ids = torch::cat({ids, next.unsqueeze(0)}, 1);
  }
  return generated;
}

}  // namespace demo

namespace {

constexpr const char* kProgram = "acc-demo-big-model";
const std::vector<int64_t> kPrompt = {17, 42, 7, 256, 99};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << kProgram << ": " << message << " (see --help)\n";
  std::exit(2);
}

// The model has `positions` position embeddings: prompt + generated tokens must fit.
int64_t max_tokens() { return demo::Config().positions - static_cast<int64_t>(kPrompt.size()); }

void print_usage() {
  std::cout << "usage: " << kProgram << " [--checkpoint DIR] [--max-cpu-memory SIZE] [--tokens N]\n"
            << "\n"
            << "Builds a small GPT-like model with empty weights, loads DIR into it with\n"
            << "acc::load_checkpoint_and_dispatch(\"auto\") under a CPU memory limit (blocks that do\n"
            << "not fit stay on disk, mapped from the checkpoint's files), prints where each block\n"
            << "runs, greedily generates N tokens from a fixed prompt, and prints the process's memory.\n"
            << "If DIR holds no checkpoint yet, one is written first (seed 0, 4MB shards + index).\n"
            << "\n"
            << "  --checkpoint DIR       checkpoint directory (default: acc-big-model-checkpoint)\n"
            << "  --max-cpu-memory SIZE  weights kept in memory, e.g. 16MB, 20MiB, 0 (default: 16MB)\n"
            << "  --tokens N             tokens to generate, 1.." << max_tokens() << " (default: 8)\n"
            << "  --help                 this text\n";
}

struct Flags {
  std::string checkpoint = "acc-big-model-checkpoint";
  std::string max_cpu_memory = "16MB";
  int tokens = 8;
};

Flags parse_flags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i], value;
    bool has_value = false;
    if (const auto equals = flag.find('='); flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      value = flag.substr(equals + 1);
      flag.resize(equals);
      has_value = true;
    }
    if (flag == "--help" || flag == "-h") {
      if (has_value) usage_error("--help takes no value");
      print_usage();
      std::exit(0);
    }
    if (flag != "--checkpoint" && flag != "--max-cpu-memory" && flag != "--tokens") {
      usage_error(flag.rfind("-", 0) == 0 ? "unknown flag '" + flag + "'" : "unexpected argument '" + flag + "'");
    }
    if (!has_value) {
      if (i + 1 >= argc) usage_error(flag + " needs a value");
      value = argv[++i];
    }
    if (value.empty()) usage_error(flag + " needs a non-empty value");
    if (flag == "--checkpoint") {
      flags.checkpoint = value;
    } else if (flag == "--max-cpu-memory") {
      try {
        acc::parse_max_memory({{"cpu", value}});
      } catch (const acc::ConfigError&) {
        usage_error("--max-cpu-memory: '" + value + "' is not a size (e.g. 16MB, 20MiB, 1000000)");
      }
      flags.max_cpu_memory = value;
    } else {
      const int64_t most = max_tokens();
      char* end = nullptr;
      const long long n = std::strtoll(value.c_str(), &end, 10);
      if (*end != '\0' || n < 1 || n > most) {
        usage_error("--tokens: '" + value + "' is not a number from 1 to " + std::to_string(most));
      }
      flags.tokens = static_cast<int>(n);
    }
  }
  return flags;
}

bool has_checkpoint(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  return fs::exists(fs::path(dir) / "model.safetensors.index.json", error) ||
         fs::exists(fs::path(dir) / "model.safetensors", error);
}

double status_mib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return -1;
}

std::string mib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string join(const std::vector<int64_t>& ids) {
  std::string text;
  for (const auto id : ids) text += (text.empty() ? "" : " ") + std::to_string(id);
  return text;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  const demo::Config config;
  try {
    // 1. The checkpoint: written once by a normally built model, which also generates the
    //    reference tokens that the dispatched model must reproduce.
    std::vector<int64_t> reference;
    if (!has_checkpoint(flags.checkpoint)) {
      torch::manual_seed(0);
      demo::Gpt model(config);
      model->eval();
      reference = demo::generate(model, kPrompt, flags.tokens);
      acc::save_model(model, flags.checkpoint, "4MB");
      std::cout << "wrote checkpoint " << flags.checkpoint << " (4MB shards + model.safetensors.index.json)\n";
    }

    // 2. Empty construction: shapes only, no weight memory, no initialisation.
    auto start = std::chrono::steady_clock::now();
    demo::Gpt model = nullptr;
    {
      acc::init_empty_weights empty;
      model = demo::Gpt(config);
    }
    model->eval();

    // 3. Load and dispatch: blocks are never split; what does not fit the CPU limit stays on disk.
    const auto report = acc::load_checkpoint_and_dispatch(
        model, flags.checkpoint, "auto",
        acc::DispatchOptions()
            .max_memory(acc::parse_max_memory({{"cpu", flags.max_cpu_memory}}))
            .no_split_module_classes({"Block"}));
    std::printf("loaded %s in %.1f ms with --max-cpu-memory %s\n", flags.checkpoint.c_str(), ms_since(start),
                flags.max_cpu_memory.c_str());

    std::cout << "device map (module -> where its weights rest):\n";
    for (const auto& [module, device] : report.device_map.entries()) {
      std::cout << "  " << (module.empty() ? "\"\"" : module) << " -> " << device << "\n";
    }
    // Where each block runs: the execution device of the map entry that covers it ("cpu" and
    // "disk" weights both run on the CPU here, there being no GPU in the map).
    std::cout << "blocks:\n";
    for (int64_t i = 0; i < config.blocks; ++i) {
      const std::string name = "blocks." + std::to_string(i);
      const auto entry = report.device_map.entry_of(name);
      const std::string runs_on = entry ? report.execution_devices[*entry].second : "?";
      std::cout << "  " << name << ": weights on " << report.device_map.device_of(name).value_or("?")
                << ", runs on " << runs_on << "\n";
    }
    std::cout << "weights per device:";
    for (const auto& [device, bytes] : report.bytes_per_device) std::cout << "  " << device << " " << mib(bytes);
    std::cout << "\n";

    // 4. Generate.
    start = std::chrono::steady_clock::now();
    const auto generated = demo::generate(model, kPrompt, flags.tokens);
    const double generate_ms = ms_since(start);
    std::cout << "prompt: " << join(kPrompt) << "\n";
    std::printf("generated: %s  (%d tokens in %.1f ms)\n", join(generated).c_str(), flags.tokens, generate_ms);
    if (!reference.empty()) {
      if (generated != reference) {
        std::cerr << kProgram << ": the dispatched model generated " << join(generated)
                  << " but the model that wrote the checkpoint generated " << join(reference) << "\n";
        return 1;
      }
      std::cout << "same tokens as the in-memory model that wrote the checkpoint\n";
    }

    // 5. Memory: RssAnon is what the process allocated (weights kept on the CPU, activations);
    //    disk weights are file pages, mapped only while their block runs. The peak includes
    //    writing the checkpoint when this run did.
    std::printf("memory: RssAnon %.1f MiB, RssFile %.1f MiB, peak RSS (VmHWM) %.1f MiB\n", status_mib("RssAnon"),
                status_mib("RssFile"), status_mib("VmHWM"));
  } catch (const std::exception& error) {
    std::cerr << kProgram << ": " << error.what() << "\n";
    return 1;
  }
  return 0;
}
