// One rank of an FSDP scenario (started by fsdp_test.cpp through spawn_ranks). Every reference is
// computed in this same run: a one-process run on the global batch, and DDP on the same ranks.
// Exits 0 when every check passed; prints "FAIL: ..." and exits 1 otherwise.
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <ftw.h>
#include <iostream>
#include <limits>
#include <string>
#include <unistd.h>

#include <acc/acc.h>
#include <acc/testing.h>

#include "held_bytes.h"
#include "worker_checks.h"

namespace {

using acc::testing::expect;
using acc::testing::fail;

// More than 20 parameter tensors of mixed sizes: biases of 1, 2 and 3 elements and a 0-dim scalar
// are smaller than the number of ranks, so some ranks hold none of them.
struct MixedImpl : torch::nn::Module {
  MixedImpl() {
    const std::vector<int64_t> widths{32, 40, 3, 12, 1, 7, 2, 9, 4};
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      layers.push_back(register_module("layer" + std::to_string(i),
                                       torch::nn::Linear(widths[i], widths[i + 1])));
    }
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})));
    scale = register_parameter("scale", torch::rand({3}) + 0.5);
    shift = register_parameter("shift", torch::randn({1}));
    temperature = register_parameter("temperature", torch::ones({}));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < layers.size(); ++i) {
      x = layers[i]->forward(x);
      if (i + 1 < layers.size()) x = torch::tanh(x);
    }
    return norm->forward(x) * temperature + shift + 0.1 * scale.sum();
  }
  std::vector<torch::nn::Linear> layers;
  torch::nn::LayerNorm norm{nullptr};
  torch::Tensor scale, shift, temperature;
};
TORCH_MODULE(Mixed);

double max_abs_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

void expect_equal_across_ranks(acc::Accelerator& accelerator, const std::vector<torch::Tensor>& tensors,
                               const std::string& what) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.detach().reshape({1, -1}));
  auto all = accelerator.gather(torch::cat(flat, 1));
  for (int64_t r = 1; r < all.size(0); ++r) {
    expect(torch::equal(all[r], all[0]), what + ": rank " + std::to_string(r) + " differs from rank 0");
  }
}

acc::ShardingStrategy strategy_named(const std::string& name) {
  return acc::parse_sharding_strategy(name, "worker argument");
}

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

enum class Mode { kPlain, kAccumulate, kClip };

struct Trained {
  std::vector<torch::Tensor> params;
  double last_norm = 0;
  int64_t held = 0;
};

constexpr int kSteps = 10;
constexpr int64_t kBatch = 3;
constexpr double kLr = 1e-3;
constexpr double kMaxNorm = 0.05;  // small enough that every step clips

torch::Tensor batch_x(int step, int micro, int64_t rows) {
  torch::manual_seed(1000 + 10 * step + micro);
  return torch::randn({rows, 32});
}
torch::Tensor batch_y(int step, int micro, int64_t rows) {
  torch::manual_seed(5000 + 10 * step + micro);
  return torch::randn({rows, 4});
}

// Trains with an Accelerator (DDP when `plugin` is empty), each rank initialised differently.
Trained train_prepared(std::optional<acc::FullyShardedDataParallelPlugin> plugin, Mode mode) {
  auto options = acc::AcceleratorOptions().gradient_accumulation_steps(mode == Mode::kAccumulate ? 2 : 1);
  if (plugin) options.fsdp_plugin(*plugin);
  acc::Accelerator accelerator(options);
  const int rank = accelerator.process_index(), world = accelerator.num_processes();
  if (plugin) {
    expect(accelerator.distributed_type() == acc::DistributedType::FSDP,
           "distributed_type() is " + acc::to_string(accelerator.distributed_type()) + ", not FSDP");
  }
  torch::manual_seed(100 + rank);
  Mixed model;
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(kLr));
  accelerator.prepare(model, optimizer);
  const int micro_steps = mode == Mode::kAccumulate ? 2 : 1;
  Trained out;
  for (int step = 0; step < kSteps; ++step) {
    for (int micro = 0; micro < micro_steps; ++micro) {
      auto x = batch_x(step, micro, world * kBatch).narrow(0, rank * kBatch, kBatch);
      auto y = batch_y(step, micro, world * kBatch).narrow(0, rank * kBatch, kBatch);
      auto guard = accelerator.accumulate(model);
      const auto collectives = accelerator.state().num_collectives();
      accelerator.backward(torch::mse_loss(model->forward(x), y));
      if (!accelerator.sync_gradients()) {
        expect(accelerator.state().num_collectives() == collectives,
               "a backward while accumulating communicated");
      }
      if (mode == Mode::kClip && accelerator.sync_gradients()) {
        out.last_norm = accelerator.clip_grad_norm_(model->parameters(), kMaxNorm);
      }
      if (step == kSteps - 1 && micro == micro_steps - 1) {
        optimizer.step();
        out.held = acc::testing::gradient_and_adam_state_bytes(*model, optimizer);  // before zero_grad drops the gradients
        optimizer.zero_grad();
        continue;
      }
      optimizer.step();
      optimizer.zero_grad();
    }
  }
  for (const auto& p : model->parameters()) out.params.push_back(p.detach().clone());
  expect_equal_across_ranks(accelerator, out.params, "parameters after training");
  return out;
}

// One process, the whole global batch, rank 0's initial weights.
Trained train_single(int world, Mode mode) {
  torch::manual_seed(100);
  Mixed model;
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(kLr));
  const int micro_steps = mode == Mode::kAccumulate ? 2 : 1;
  Trained out;
  for (int step = 0; step < kSteps; ++step) {
    optimizer.zero_grad();
    for (int micro = 0; micro < micro_steps; ++micro) {
      auto loss = torch::mse_loss(model->forward(batch_x(step, micro, world * kBatch)),
                                  batch_y(step, micro, world * kBatch));
      (loss / micro_steps).backward();
    }
    if (mode == Mode::kClip) out.last_norm = torch::nn::utils::clip_grad_norm_(model->parameters(), kMaxNorm);
    optimizer.step();
  }
  for (const auto& p : model->parameters()) out.params.push_back(p.detach().clone());
  return out;
}

// argv: strategy. Plain, accumulating and clipping runs each equal DDP and one process.
void equivalence(const std::string& strategy_name) {
  const auto strategy = strategy_named(strategy_name);
  const int world = env_int("WORLD_SIZE", 1);
  const int local_world = env_int("LOCAL_WORLD_SIZE", world);
  // SHARD_GRAD_OP shards over every rank, HYBRID_SHARD_ZERO2 within a machine, NO_SHARD not at all.
  const int shards = strategy == acc::ShardingStrategy::SHARD_GRAD_OP ? world
                     : strategy == acc::ShardingStrategy::HYBRID_SHARD_ZERO2 ? local_world : 1;
  // Small units: the model spans several of them, so reduce-scatters overlap backward.
  auto plugin = acc::FullyShardedDataParallelPlugin().sharding_strategy(strategy).bucket_cap_mb(0.002);
  for (Mode mode : {Mode::kPlain, Mode::kAccumulate, Mode::kClip}) {
    const std::string name = mode == Mode::kPlain ? "plain" : mode == Mode::kAccumulate ? "accumulate" : "clip";
    auto fsdp = train_prepared(plugin, mode);
    auto ddp = train_prepared(std::nullopt, mode);
    auto single = train_single(world, mode);
    const double to_single = max_abs_diff(fsdp.params, single.params);
    const double to_ddp = max_abs_diff(fsdp.params, ddp.params);
    expect(to_single <= 1e-5, name + ": " + strategy_name + " differs from one process by " + std::to_string(to_single));
    expect(to_ddp <= 1e-5, name + ": " + strategy_name + " differs from DDP by " + std::to_string(to_ddp));
    expect(max_abs_diff(ddp.params, single.params) <= 1e-5, name + ": DDP differs from one process");
    if (mode == Mode::kClip) {
      const double norm_error = std::abs(fsdp.last_norm - single.last_norm) / single.last_norm;
      expect(single.last_norm > kMaxNorm, "the clipping test did not clip");
      expect(norm_error <= 1e-5, "clip_grad_norm_ returned " + std::to_string(fsdp.last_norm) +
                                     ", one process " + std::to_string(single.last_norm));
    }
    if (mode == Mode::kPlain) {
      const double limit = 1.05 * static_cast<double>(ddp.held) / shards;
      expect(fsdp.held <= limit, strategy_name + " holds " + std::to_string(fsdp.held) +
                                     " gradient and optimizer-state bytes; DDP " + std::to_string(ddp.held) +
                                     ", so at most " + std::to_string(limit) + " with " +
                                     std::to_string(shards) + " shards");
      std::cout << "memory: " << strategy_name << " " << fsdp.held << " bytes, DDP " << ddp.held << std::endl;
    }
    std::cout << "ok " << name << ": to one process " << to_single << ", to DDP " << to_ddp << std::endl;
  }
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const acc::Error& e) {
    return e.what();
  }
  return "";
}

void expect_error(const std::string& message, const std::string& needle, const std::string& what) {
  expect(message.find(needle) != std::string::npos,
         what + ": expected an error containing '" + needle + "', got '" + message + "'");
}

int remove_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

// What SHARD_GRAD_OP refuses, and save_model with full parameters.
void rejections_and_save_model(const std::string& directory) {
  auto plugin = acc::FullyShardedDataParallelPlugin().sharding_strategy(acc::ShardingStrategy::SHARD_GRAD_OP);
  acc::Accelerator accelerator(acc::AcceleratorOptions().fsdp_plugin(plugin));
  // Kept alive to the end: prepare() remembers models by address.
  Mixed for_lbfgs, for_plain, for_order;
  acc::Optimizer<torch::optim::LBFGS> lbfgs(for_lbfgs->parameters(), torch::optim::LBFGSOptions(0.1));
  expect_error(error_of([&] { accelerator.prepare(for_lbfgs, lbfgs); }), "LBFGS", "LBFGS");
  torch::optim::Adam plain(for_plain->parameters(), torch::optim::AdamOptions(kLr));
  expect_error(error_of([&] { accelerator.prepare(for_plain, plain); }),
               "acc::Optimizer<torch::optim::Adam> optimizer", "plain optimizer");
  acc::Optimizer<torch::optim::Adam> first(for_order->parameters(), torch::optim::AdamOptions(kLr));
  expect_error(error_of([&] { accelerator.prepare(first, for_order); }),
               "prepare the model before the optimizer", "optimizer before model");
  torch::manual_seed(7);
  Mixed model;
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(kLr));
  accelerator.prepare(model, optimizer);
  const auto rank = accelerator.process_index();
  for (int step = 0; step < 3; ++step) {
    accelerator.backward(torch::mse_loss(model->forward(batch_x(step, rank, 4)), batch_y(step, rank, 4)));
    optimizer.step();
    optimizer.zero_grad();
  }
  accelerator.save_model(model, directory + "/model");
  torch::manual_seed(99);
  Mixed loaded;
  acc::load_checkpoint_in_model(loaded, directory + "/model/model.safetensors");
  const double diff = max_abs_diff(loaded->parameters(), model->parameters());
  expect(diff == 0, "save_model wrote parameters that differ from the trained ones by " + std::to_string(diff));
  accelerator.wait_for_everyone();
  if (accelerator.is_main_process()) ::nftw(directory.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  std::cout << "ok" << std::endl;
}


// ---- Checkpoints (state dicts). Every run trains on the same global batch of kGlobal rows, each
// rank its slice, so runs on 1, 2, 3 and 4 processes compute the same steps.
constexpr int64_t kGlobal = 12;
constexpr int kSaveAt = 3;
constexpr int kStopAt = 6;

using Adam = acc::Optimizer<torch::optim::Adam>;

// Two parameter groups (the checkpoint numbers state across them) and amsgrad (an optional field).
std::unique_ptr<Adam> make_adam(Mixed& model) {
  std::vector<torch::Tensor> layers, rest;
  for (const auto& item : model->named_parameters()) {
    (item.key().rfind("layer", 0) == 0 ? layers : rest).push_back(item.value());
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(layers);
  groups.emplace_back(rest, std::make_unique<torch::optim::AdamOptions>(torch::optim::AdamOptions(3 * kLr).amsgrad(true)));
  return std::make_unique<Adam>(std::move(groups), torch::optim::AdamOptions(kLr).amsgrad(true));
}

void train_steps(acc::Accelerator& accelerator, Mixed& model, Adam& optimizer, int from, int to) {
  const int64_t rows = kGlobal / accelerator.num_processes();
  const int64_t first = rows * accelerator.process_index();
  for (int step = from; step < to; ++step) {
    auto x = batch_x(step, 0, kGlobal).narrow(0, first, rows);
    auto y = batch_y(step, 0, kGlobal).narrow(0, first, rows);
    accelerator.backward(torch::mse_loss(model->forward(x), y));
    optimizer.step();
    optimizer.zero_grad();
  }
}

acc::AcceleratorOptions fsdp_options(const std::string& strategy, acc::StateDictType type) {
  return acc::AcceleratorOptions().fsdp_plugin(acc::FullyShardedDataParallelPlugin()
                                                   .sharding_strategy(strategy_named(strategy))
                                                   .state_dict_type(type)
                                                   .bucket_cap_mb(0.002));
}

acc::safetensors::NamedTensors named_parameters(Mixed& model) {
  acc::safetensors::NamedTensors out;
  for (const auto& item : model->named_parameters()) out.emplace_back(item.key(), item.value().detach().clone());
  return out;
}

double max_difference(const acc::safetensors::NamedTensors& a, const acc::safetensors::NamedTensors& b,
                      const std::string& what) {
  expect(a.size() == b.size(), what + ": " + std::to_string(a.size()) + " tensors against " + std::to_string(b.size()));
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    expect(a[i].first == b[i].first, what + ": tensor " + a[i].first + " against " + b[i].first);
    expect(a[i].second.sizes() == b[i].second.sizes(), what + ": shapes of " + a[i].first + " differ");
    worst = std::max(worst, (a[i].second - b[i].second).abs().max().item<double>());
  }
  return worst;
}

// Two trainings that take different but equally valid float32 paths (SHARD_GRAD_OP steps 1-D shard
// pieces, DDP whole tensors: vectorised kernels round the elements of a chunk's tail differently)
// agree to rounding, not bit for bit; how far apart depends on the CPU's vector width and the
// thread count. Within rtol 1e-5 (|a - b| <= 1e-5 (1 + |b|)): a wrong slice, field or gather is off
// by the values themselves. Returns the largest |a - b| / (1 + |b|).
double max_relative_difference(const acc::safetensors::NamedTensors& a, const acc::safetensors::NamedTensors& b,
                               const std::string& what) {
  max_difference(a, b, what);  // names and shapes
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const auto& reference = b[i].second;
    worst = std::max(worst, ((a[i].second - reference).abs() / (reference.abs() + 1)).max().item<double>());
  }
  return worst;
}
constexpr double kTrainingTolerance = 1e-5;

acc::safetensors::NamedTensors sorted_file(const std::string& path) {
  auto tensors = acc::safetensors::load_file(path);
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return tensors;
}

// argv: directory, strategy. Trains to kSaveAt, saves SHARDED_STATE_DICT (and the whole weights
// with save_model, for acc-merge-weights to be compared with), trains on to kStopAt and leaves
// the final parameters as the reference of sharded_resume.
void sharded_save(const std::string& directory, const std::string& strategy) {
  acc::Accelerator accelerator(fsdp_options(strategy, acc::StateDictType::SHARDED_STATE_DICT));
  torch::manual_seed(7);
  Mixed model;
  auto optimizer = make_adam(model);
  accelerator.prepare(model, *optimizer);
  train_steps(accelerator, model, *optimizer, 0, kSaveAt);
  accelerator.save_state(directory + "/checkpoint");
  accelerator.save_model(model, directory + "/whole");
  train_steps(accelerator, model, *optimizer, kSaveAt, kStopAt);
  if (accelerator.is_main_process()) {
    acc::safetensors::save_file(named_parameters(model), directory + "/reference.safetensors");
    const int shards = strategy == "HYBRID_SHARD_ZERO2" ? env_int("LOCAL_WORLD_SIZE", 1) : accelerator.num_processes();
    for (int r = 0; r < shards; ++r) {
      const auto name = directory + "/checkpoint/model.shard-" + std::to_string(r) + "-of-" + std::to_string(shards) + ".safetensors";
      expect(std::filesystem::exists(name), "save_state wrote no " + name);
    }
    expect(!std::filesystem::exists(directory + "/checkpoint/model.safetensors"),
           "SHARDED_STATE_DICT also wrote a whole model.safetensors");
  }
  std::cout << "ok" << std::endl;
}

// argv: directory, strategy. Another number of processes, other initial weights: load_state
// alone must make the rest of training equal the uninterrupted run's.
void sharded_resume(const std::string& directory, const std::string& strategy) {
  {
    // A sharded checkpoint read as a whole one names the setting to change.
    acc::Accelerator accelerator(fsdp_options(strategy, acc::StateDictType::FULL_STATE_DICT));
    Mixed model;
    auto optimizer = make_adam(model);
    accelerator.prepare(model, *optimizer);
    expect_error(error_of([&] { accelerator.load_state(directory + "/checkpoint"); }), "SHARDED_STATE_DICT",
                 "loading a sharded checkpoint as FULL_STATE_DICT");
  }
  acc::Accelerator accelerator(fsdp_options(strategy, acc::StateDictType::SHARDED_STATE_DICT));
  torch::manual_seed(99 + accelerator.process_index());
  Mixed model;
  auto optimizer = make_adam(model);
  accelerator.prepare(model, *optimizer);
  accelerator.load_state(directory + "/checkpoint");
  train_steps(accelerator, model, *optimizer, kSaveAt, kStopAt);
  const auto resumed = named_parameters(model);
  std::vector<torch::Tensor> values;
  for (const auto& [name, tensor] : resumed) values.push_back(tensor);
  expect_equal_across_ranks(accelerator, values, "parameters after resuming");
  const double diff = max_difference(resumed, acc::safetensors::load_file(directory + "/reference.safetensors"),
                                     "resumed against uninterrupted");
  expect(diff <= 1e-5, "resumed on " + std::to_string(accelerator.num_processes()) +
                           " processes, training differs from the uninterrupted run by " + std::to_string(diff));
  std::cout << "ok: resumed on " << accelerator.num_processes() << " processes, off by " << diff << std::endl;
}

// argv: two safetensors files that must hold the same tensors, bit for bit.
void same_tensors(const std::string& a, const std::string& b) {
  const double diff = max_difference(sorted_file(a), sorted_file(b), a + " against " + b);
  expect(diff == 0, a + " and " + b + " differ by " + std::to_string(diff));
  std::cout << "ok" << std::endl;
}

acc::safetensors::NamedTensors sorted(acc::safetensors::NamedTensors tensors) {
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return tensors;
}

// argv: directory. FULL_STATE_DICT under SHARD_GRAD_OP writes the files DDP writes: its model file
// holds the trained whole parameters bit for bit, both runs' files have the same tensors (names,
// shapes; values as close as two trainings get), each run loads the other's files exactly, and
// training goes on alike from either.
void full_against_ddp(const std::string& directory) {
  auto train_and_save = [&](acc::AcceleratorOptions options, const std::string& where) {
    acc::Accelerator accelerator(options);
    torch::manual_seed(7);
    Mixed model;
    auto optimizer = make_adam(model);
    accelerator.prepare(model, *optimizer);
    train_steps(accelerator, model, *optimizer, 0, kSaveAt);
    accelerator.save_state(directory + "/" + where);
    return sorted(named_parameters(model));
  };
  auto resume = [&](acc::AcceleratorOptions options, const std::string& where) {
    acc::Accelerator accelerator(options);
    torch::manual_seed(99 + accelerator.process_index());
    Mixed model;
    auto optimizer = make_adam(model);
    accelerator.prepare(model, *optimizer);
    accelerator.load_state(directory + "/" + where);
    const double loaded = max_difference(sorted(named_parameters(model)),
                                         sorted_file(directory + "/" + where + "/model.safetensors"), "loaded parameters");
    expect(loaded == 0, "loading " + where + "'s files changed the parameters by " + std::to_string(loaded));
    train_steps(accelerator, model, *optimizer, kSaveAt, kStopAt);
    return named_parameters(model);
  };
  const auto full = fsdp_options("SHARD_GRAD_OP", acc::StateDictType::FULL_STATE_DICT);
  train_and_save(acc::AcceleratorOptions(), "ddp");
  const auto trained = train_and_save(full, "full");
  const double written = max_difference(trained, sorted_file(directory + "/full/model.safetensors"), "FULL model file");
  expect(written == 0, "FULL_STATE_DICT's model.safetensors differs from the trained parameters by " +
                           std::to_string(written));
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    const double diff = max_relative_difference(sorted_file(directory + "/full/" + file),
                                                sorted_file(directory + "/ddp/" + file),
                                                std::string("DDP's and FULL_STATE_DICT's ") + file);
    expect(diff <= kTrainingTolerance,
           std::string("FULL_STATE_DICT's ") + file + " differs from DDP's by " + std::to_string(diff) + " (relative)");
  }
  const auto ddp_from_full = resume(acc::AcceleratorOptions(), "full");
  const auto fsdp_from_ddp = resume(full, "ddp");
  const auto fsdp_from_full = resume(full, "full");
  const double cross = max_difference(ddp_from_full, fsdp_from_ddp, "DDP from FULL against FSDP from DDP");
  const double same = max_relative_difference(fsdp_from_full, fsdp_from_ddp, "FSDP from FULL against FSDP from DDP");
  expect(cross <= 1e-5, "DDP resumed from FULL_STATE_DICT and FSDP resumed from DDP's files differ by " + std::to_string(cross));
  expect(same <= kTrainingTolerance,
         "FSDP resumed from its own and from DDP's files differs by " + std::to_string(same) + " (relative)");
  std::cout << "ok: DDP from FULL vs FSDP from DDP " << cross << std::endl;
}

// argv: directory. Every element-wise optimizer libtorch has trains under SHARD_GRAD_OP as under
// DDP, and FULL_STATE_DICT writes DDP's state tensors (Adagrad's exist before the first step).
// `fused_under_fsdp`: the FSDP run steps its shards through the fused kernels (fused(true)), the
// DDP run through libtorch's loop.
template <typename Opt, typename Options>
void optimizer_against_ddp(const std::string& directory, const std::string& name, Options options,
                           double tolerance = kTrainingTolerance, bool fused_under_fsdp = false) {
  auto run = [&](acc::AcceleratorOptions accelerator_options, const std::string& where) {
    acc::Accelerator accelerator(accelerator_options);
    torch::manual_seed(7);
    Mixed model;
    acc::Optimizer<Opt> optimizer(model->parameters(), options);
    optimizer.fused(fused_under_fsdp && accelerator.distributed_type() == acc::DistributedType::FSDP);
    accelerator.prepare(model, optimizer);
    const int64_t rows = kGlobal / accelerator.num_processes();
    for (int step = 0; step < kSaveAt; ++step) {
      auto x = batch_x(step, 0, kGlobal).narrow(0, rows * accelerator.process_index(), rows);
      auto y = batch_y(step, 0, kGlobal).narrow(0, rows * accelerator.process_index(), rows);
      accelerator.backward(torch::mse_loss(model->forward(x), y));
      optimizer.step();
      optimizer.zero_grad();
    }
    accelerator.save_state(directory + "/" + where);
    return named_parameters(model);
  };
  const auto ddp = run(acc::AcceleratorOptions(), name + "-ddp");
  const auto fsdp = run(fsdp_options("SHARD_GRAD_OP", acc::StateDictType::FULL_STATE_DICT), name + "-full");
  const double params = max_difference(ddp, fsdp, name + " parameters");
  expect(params <= 1e-5, name + ": SHARD_GRAD_OP differs from DDP by " + std::to_string(params));
  const double state = max_relative_difference(sorted_file(directory + "/" + name + "-full/optimizer.safetensors"),
                                               sorted_file(directory + "/" + name + "-ddp/optimizer.safetensors"),
                                               name + " optimizer state");
  expect(state <= tolerance,
         name + ": FULL_STATE_DICT's optimizer state differs from DDP's by " + std::to_string(state) + " (relative)");
  std::cout << "ok " << name << ": parameters " << params << ", state " << state << std::endl;
}

void every_optimizer(const std::string& directory) {
  using namespace torch::optim;
  optimizer_against_ddp<SGD>(directory, "sgd", SGDOptions(0.05).momentum(0.9).nesterov(true));
  optimizer_against_ddp<AdamW>(directory, "adamw", AdamWOptions(kLr).amsgrad(true));
  optimizer_against_ddp<AdamW>(directory, "adamw-fused", AdamWOptions(kLr).amsgrad(true).weight_decay(0.01),
                               kTrainingTolerance, /*fused_under_fsdp=*/true);
  optimizer_against_ddp<SGD>(directory, "sgd-fused", SGDOptions(0.05).momentum(0.9).nesterov(true),
                             kTrainingTolerance, /*fused_under_fsdp=*/true);
  optimizer_against_ddp<Adagrad>(directory, "adagrad", AdagradOptions(0.05).initial_accumulator_value(0.1));
  // Centered RMSprop divides by sqrt(square_avg - grad_avg^2), a difference of nearly equal small
  // numbers here, which multiplies the runs' rounding differences (measured up to 2.2e-5 relative
  // with one thread per rank, 4e-6 with two).
  optimizer_against_ddp<RMSprop>(directory, "rmsprop", RMSpropOptions(0.01).centered(true).momentum(0.5), 1e-4);
}

// argv: directory. offload_params (forced on CPU, acc/testing.h): the optimizer steps master shards
// apart from the model's flat buffers, and training, FULL and SHARDED checkpoints are the same as
// without offload.
void offload(const std::string& directory) {
  acc::testing::ForceOnCpuGuard force({/*grad_scaler=*/false, /*fsdp_offload=*/true});
  auto run = [&](bool offloaded, const std::string& where, bool resume) {
    acc::Accelerator accelerator(acc::AcceleratorOptions().fsdp_plugin(
        acc::FullyShardedDataParallelPlugin()
            .sharding_strategy(acc::ShardingStrategy::SHARD_GRAD_OP)
            .state_dict_type(acc::StateDictType::SHARDED_STATE_DICT)
            .bucket_cap_mb(0.002)
            .offload_params(offloaded)));
    torch::manual_seed(resume ? 99 + accelerator.process_index() : 7);
    Mixed model;
    auto optimizer = make_adam(model);
    accelerator.prepare(model, *optimizer);
    for (const auto& group : optimizer->param_groups()) {
      for (const auto& piece : group.params()) {
        const auto params = model->parameters();
        const bool views_model = std::any_of(params.begin(), params.end(),
                                             [&](const torch::Tensor& p) { return piece.is_alias_of(p); });
        expect(views_model != offloaded, offloaded ? "under offload the optimizer steps a view of the model"
                                                   : "without offload the optimizer steps a copy of the model");
      }
    }
    if (resume) {
      accelerator.load_state(directory + "/" + where);
    } else {
      train_steps(accelerator, model, *optimizer, 0, kSaveAt);
      accelerator.save_state(directory + "/" + where);
    }
    train_steps(accelerator, model, *optimizer, kSaveAt, kStopAt);
    return named_parameters(model);
  };
  const auto plain = run(false, "plain", false);
  const auto offloaded = run(true, "offloaded", false);
  const auto resumed = run(true, "plain", true);
  const double trained = max_difference(plain, offloaded, "offloaded against plain");
  const double loaded = max_difference(plain, resumed, "offloaded resumed against plain");
  expect(trained == 0, "offload_params changed training by " + std::to_string(trained));
  expect(loaded == 0, "offload_params resumed from a checkpoint differs by " + std::to_string(loaded));
  std::cout << "ok" << std::endl;
}

// fp16 loss scaling (the scaler forced on CPU, acc/testing.h): training equals DDP's, and an
// overflow in one rank's gradient shard makes every rank skip the step.
void fp16_overflow() {
  acc::testing::ForceOnCpuGuard force({/*grad_scaler=*/true, /*fsdp_offload=*/false});
  auto run = [&](bool sharded, bool overflow_on_rank_1) {
    auto options = acc::AcceleratorOptions().mixed_precision(acc::MixedPrecision::FP16);
    if (sharded) options.fsdp_plugin(acc::FullyShardedDataParallelPlugin()
                                         .sharding_strategy(acc::ShardingStrategy::SHARD_GRAD_OP)
                                         .bucket_cap_mb(0.002));
    acc::Accelerator accelerator(options);
    torch::manual_seed(7);
    Mixed model;
    auto optimizer = make_adam(model);
    accelerator.prepare(model, *optimizer);
    train_steps(accelerator, model, *optimizer, 0, kSaveAt);
    expect(!accelerator.optimizer_step_was_skipped(), "a clean fp16 step was skipped");
    if (overflow_on_rank_1) {
      const auto before = named_parameters(model);
      auto x = batch_x(kSaveAt, 0, kGlobal).narrow(0, 0, kGlobal / accelerator.num_processes());
      auto y = batch_y(kSaveAt, 0, kGlobal).narrow(0, 0, kGlobal / accelerator.num_processes());
      accelerator.backward(torch::mse_loss(model->forward(x), y));
      if (accelerator.process_index() == 1) {
        // This rank's shard only: the other rank's gradients are finite.
        auto grad = optimizer->param_groups()[0].params()[0].grad();
        grad.view({-1})[0] = std::numeric_limits<float>::infinity();
      }
      optimizer->step();
      optimizer->zero_grad();
      expect(accelerator.optimizer_step_was_skipped(), "rank " + std::to_string(accelerator.process_index()) +
                                                           " stepped although rank 1's shard overflowed");
      const double moved = max_difference(before, named_parameters(model), "parameters around the skipped step");
      expect(moved == 0, "the skipped step changed the parameters by " + std::to_string(moved));
    }
    return named_parameters(model);
  };
  const double diff = max_difference(run(false, false), run(true, false), "fp16 SHARD_GRAD_OP against DDP");
  expect(diff <= 1e-5, "fp16 SHARD_GRAD_OP differs from DDP by " + std::to_string(diff));
  run(true, true);
  std::cout << "ok: fp16 SHARD_GRAD_OP against DDP " << diff << std::endl;
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) fail("usage: acc_fsdp_worker <scenario> [args]");
  // Fakes machines on one host: LOCAL_WORLD_SIZE consecutive ranks per machine.
  if (const char* local = std::getenv("ACC_TEST_LOCAL_WORLD_SIZE")) {
    const int per_machine = std::atoi(local);
    ::setenv("LOCAL_WORLD_SIZE", local, 1);
    ::setenv("LOCAL_RANK", std::to_string(env_int("RANK", 0) % per_machine).c_str(), 1);
  }
  try {
    if (args[0] == "equivalence" && args.size() == 2) {
      equivalence(args[1]);
    } else if (args[0] == "rejections_and_save_model" && args.size() == 2) {
      rejections_and_save_model(args[1]);
    } else if (args[0] == "sharded_save" && args.size() == 3) {
      sharded_save(args[1], args[2]);
    } else if (args[0] == "sharded_resume" && args.size() == 3) {
      sharded_resume(args[1], args[2]);
    } else if (args[0] == "same_tensors" && args.size() == 3) {
      same_tensors(args[1], args[2]);
    } else if (args[0] == "fp16_overflow" && args.size() == 1) {
      fp16_overflow();
    } else if (args[0] == "offload" && args.size() == 2) {
      offload(args[1]);
    } else if (args[0] == "every_optimizer" && args.size() == 2) {
      every_optimizer(args[1]);
    } else if (args[0] == "full_against_ddp" && args.size() == 2) {
      full_against_ddp(args[1]);
    } else {
      fail("unknown scenario " + args[0]);
    }
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
  return 0;
}
