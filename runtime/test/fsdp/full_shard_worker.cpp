// One rank of a FULL_SHARD / HYBRID_SHARD scenario (started by fsdp_test.cpp through spawn_ranks).
// References are computed in this same run: DDP on the same ranks and one process on the global
// batch. Exits 0 when every check passed; prints "FAIL: ..." and exits 1 otherwise.
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <unordered_set>

#include <acc/acc.h>
#include <acc/testing.h>

#include "transformer_block.h"
#include "worker_checks.h"

namespace {

using acc::testing::expect;
using acc::testing::fail;

constexpr int64_t kVocab = 37, kDim = 16, kHidden = 40, kSeq = 6, kHeads = 2, kBlocks = 4;

// The unit FULL_SHARD gathers and releases; its forward runs the seam (one line), a parent calls it.
using acc::testing::TransformerBlock;

struct TinyLmImpl : torch::nn::Module {
  TinyLmImpl(bool tied, bool twice, bool checkpointed = false) : tied(tied), twice(twice), checkpointed(checkpointed) {
    embed = register_module("embed", torch::nn::Embedding(kVocab, kDim));
    position = register_parameter("position", torch::randn({kSeq, kDim}) * 0.1);
    for (int64_t i = 0; i < kBlocks; ++i) {
      blocks.push_back(register_module("block" + std::to_string(i), TransformerBlock(kDim, kHeads, kHidden)));
    }
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({kDim})));
    if (!tied) head = register_module("head", torch::nn::Linear(torch::nn::LinearOptions(kDim, kVocab).bias(false)));
  }
  torch::Tensor forward(torch::Tensor tokens) {
    acc::ForwardHooksGuard forward_hooks(*this);
    auto x = embed->forward(tokens) + position;
    for (size_t i = 0; i < blocks.size(); ++i) {
      auto& block = blocks[i];
      // Activation checkpointing of a unit its parent calls: the call goes through acc::checkpoint.
      x = checkpointed ? acc::checkpoint([&block](const torch::Tensor& h) { return block->forward(h); }, x)
                       : block->forward(x);
      if (twice && i == 0) x = blocks[i]->forward(x);  // a unit called twice per forward
    }
    x = norm->forward(x);
    return tied ? torch::matmul(x, embed->weight.t()) : head->forward(x);
  }
  bool tied, twice, checkpointed;
  torch::nn::Embedding embed{nullptr};
  torch::Tensor position;
  std::vector<TransformerBlock> blocks;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(TinyLm);

struct Options {
  bool tied = false, twice = false, accumulate = false, clip = false, eval = false, bf16 = false, checkpoint = false;
  acc::BackwardPrefetch prefetch = acc::BackwardPrefetch::BACKWARD_PRE;  // torch's default
  bool forward_prefetch = false;
  // CUDA-only paths forced on CPU (acc/testing.h): offload_params (masters and gradient shards apart
  // from the model) and fp16 loss scaling (the GradScaler, found-inf reduced over the shards).
  bool offload = false, fp16 = false;
  // cpu_ram_efficient_loading: every rank but 0 builds the model empty; prepare fills it from rank 0.
  bool empty = false;
  std::string name() const {
    std::string out = tied ? "tied" : "untied";
    for (auto [on, what] : {std::pair{twice, "twice"}, {accumulate, "accumulate"}, {clip, "clip"}, {eval, "eval"},
                            {bf16, "bf16"}, {checkpoint, "checkpoint"}, {forward_prefetch, "forward_prefetch"},
                            {offload, "offload"}, {fp16, "fp16"}, {empty, "built_empty_off_rank0"}}) {
      if (on) out += std::string("+") + what;
    }
    if (prefetch != acc::BackwardPrefetch::BACKWARD_PRE) out += "+" + acc::to_string(prefetch);
    return out;
  }
};

constexpr int kSteps = 10;
constexpr int64_t kBatch = 2;

torch::Tensor tokens(int step, int micro, int64_t rows) {
  torch::manual_seed(700 + 10 * step + micro);
  return torch::randint(kVocab, {rows, kSeq + 1});
}

torch::Tensor lm_loss(TinyLm& model, const torch::Tensor& batch) {
  auto logits = model->forward(batch.narrow(1, 0, kSeq));
  return torch::cross_entropy_loss(logits.reshape({-1, kVocab}), batch.narrow(1, 1, kSeq).reshape({-1}));
}

std::vector<torch::Tensor> snapshot(torch::nn::Module& model) {
  std::vector<torch::Tensor> out;
  for (const auto& p : model.parameters()) out.push_back(p.detach().clone());
  return out;
}

double max_abs_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

// Bytes of the distinct storages behind `tensors`: what a rank really holds for them.
int64_t resident_bytes(const std::vector<torch::Tensor>& tensors) {
  std::unordered_set<const void*> seen;
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (seen.insert(t.storage().unsafeGetStorageImpl()).second) total += static_cast<int64_t>(t.storage().nbytes());
  }
  return total;
}

int64_t param_bytes(torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += p.numel() * p.element_size();
  return total;
}

struct Run {
  std::vector<torch::Tensor> params;
  double last_norm = 0;
};

Run train(std::optional<acc::ShardingStrategy> strategy, const Options& o) {
  acc::testing::ForceOnCpuGuard force({/*grad_scaler=*/o.fp16, /*fsdp_offload=*/o.offload && strategy});
  auto options = acc::AcceleratorOptions().gradient_accumulation_steps(o.accumulate ? 2 : 1);
  if (o.bf16) options.mixed_precision(acc::MixedPrecision::BF16);
  if (o.fp16) options.mixed_precision(acc::MixedPrecision::FP16);
  if (strategy) {
    options.fsdp_plugin(acc::FullyShardedDataParallelPlugin()
                            .sharding_strategy(*strategy)
                            .auto_wrap_policy(acc::AutoWrapPolicy::TRANSFORMER_BASED_WRAP)
                            .transformer_cls_names_to_wrap(std::vector<std::string>{"TransformerBlock"})
                            .backward_prefetch(o.prefetch)
                            .forward_prefetch(o.forward_prefetch)
                            .offload_params(o.offload)
                            .cpu_ram_efficient_loading(o.empty));
  }
  acc::Accelerator accelerator(options);
  const int rank = accelerator.process_index(), world = accelerator.num_processes();
  torch::manual_seed(100 + rank);  // rank 0's weights win through sync_module_states
  TinyLm model = nullptr;
  {
    // DDP (no FSDP option) broadcasts rank 0's weights as well, so it accepts empty models too.
    acc::init_empty_weights empty(o.empty && !accelerator.is_main_process() &&
                                  (!strategy || accelerator.cpu_ram_efficient_loading()));
    model = TinyLm(o.tied, o.twice, o.checkpoint);
  }
  expect(acc::has_meta_tensors(*model) == (o.empty && rank != 0), "the model was not built as the case asks");
  const int64_t model_bytes = param_bytes(*model);
  const int64_t block_bytes = param_bytes(*model->blocks[0]);
  const int64_t root_bytes = model_bytes - kBlocks * block_bytes;
  acc::Optimizer<torch::optim::AdamW> optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  accelerator.prepare(model, optimizer);
  expect(!acc::has_meta_tensors(*model), o.name() + ": prepare left meta tensors");
  const bool sharded = strategy.has_value();
  const int shards = !sharded ? 1 : *strategy == acc::ShardingStrategy::HYBRID_SHARD
                                        ? static_cast<int>(accelerator.state().launch().local_world_size)
                                        : world;
  if (o.empty && sharded && shards > 1) {
    // Filled one unit at a time, every block released at once: only the root (embedding, positions,
    // norm, head, which the training loop calls) is whole on any rank, never the whole model.
    const int64_t whole = resident_bytes(model->parameters());
    expect(whole >= root_bytes && whole <= root_bytes + shards * 4,
           o.name() + ": after prepare " + std::to_string(whole) + " bytes of parameters are whole; the root is " +
               std::to_string(root_bytes) + " of " + std::to_string(model_bytes));
  }

  // Sampled while units run: what is whole then (acc's hooks, registered at prepare, run first).
  int64_t peak = 0;
  int samples = 0;
  std::vector<acc::HookHandle> probes;
  const auto params = model->parameters();
  auto sample = [&](torch::nn::Module&) {
    peak = std::max(peak, resident_bytes(params));
    ++samples;
  };
  for (auto& block : model->blocks) {
    probes.push_back(acc::register_forward_pre_hook(*block, sample));
    probes.push_back(acc::register_backward_pre_hook(*block, sample));
  }

  Run out;
  const int micro_steps = o.accumulate ? 2 : 1;
  for (int step = 0; step < kSteps; ++step) {
    for (int micro = 0; micro < micro_steps; ++micro) {
      auto batch = tokens(step, micro, world * kBatch).narrow(0, rank * kBatch, kBatch);
      auto guard = accelerator.accumulate(model);
      torch::Tensor loss;
      {
        auto autocast = accelerator.autocast();
        loss = lm_loss(model, batch);
      }
      accelerator.backward(loss);
      if (o.clip && accelerator.sync_gradients()) out.last_norm = accelerator.clip_grad_norm_(model->parameters(), 0.5);
      optimizer.step();
      optimizer.zero_grad();
    }
    // The first forward tells which units run the seam; until it ran, every unit is whole.
    if (step == 0) peak = 0;
    if (sharded && shards > 1) {
      const int64_t whole = resident_bytes(params);
      expect(whole == 0, o.name() + ": " + std::to_string(whole) + " bytes of full parameters stay after step " +
                             std::to_string(step) + " (every unit runs the seam, so none should)");
      std::vector<torch::Tensor> pieces;
      for (const auto& group : optimizer.param_groups()) {
        for (const auto& p : group.params()) pieces.push_back(p);
      }
      const int64_t held = resident_bytes(pieces);
      const int64_t limit = model_bytes / shards + (kBlocks + 1) * shards * 4;  // + each unit's padding
      expect(held >= model_bytes / shards && held <= limit,
             o.name() + ": the shards hold " + std::to_string(held) + " bytes; 1/" + std::to_string(shards) +
                 " of the model is " + std::to_string(model_bytes / shards));
    }
    if (o.eval) {
      torch::NoGradGuard no_grad;
      auto batch = tokens(50 + step, 0, world * kBatch).narrow(0, rank * kBatch, kBatch);
      auto eval_loss = lm_loss(model, batch);
      expect(std::isfinite(eval_loss.item<double>()), "eval loss is not finite");
      if (sharded && shards > 1) expect(resident_bytes(params) == 0, "eval under NoGradGuard left units whole");
    }
  }
  if (sharded && shards > 1) {
    // While a block runs the root and that block are whole, and with prefetch the next block too.
    const bool prefetching = o.prefetch != acc::BackwardPrefetch::NO_PREFETCH || o.forward_prefetch;
    const int64_t limit = root_bytes + (prefetching ? 2 : 1) * block_bytes;
    expect(samples >= 2 * kBlocks, "the probes ran " + std::to_string(samples) + " times");
    expect(peak <= limit, o.name() + ": " + std::to_string(peak) + " bytes were whole at once; the root and " +
                              (prefetching ? "two blocks" : "one block") + " are " + std::to_string(limit));
    if (prefetching) {
      expect(peak > root_bytes + block_bytes, o.name() + ": no block was whole ahead of its use (prefetch)");
    }
    std::cout << "memory " << o.name() << ": peak whole " << peak << " of " << model_bytes << " bytes" << std::endl;
  }
  for (auto& probe : probes) probe.remove();
  auto whole = accelerator.summon_full_params(model);
  out.params = snapshot(*model);
  return out;
}

Run train_single(int world, const Options& o) {
  torch::manual_seed(100);
  TinyLm model(o.tied, o.twice, o.checkpoint);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  Run out;
  const int micro_steps = o.accumulate ? 2 : 1;
  for (int step = 0; step < kSteps; ++step) {
    optimizer.zero_grad();
    for (int micro = 0; micro < micro_steps; ++micro) {
      (lm_loss(model, tokens(step, micro, world * kBatch)) / micro_steps).backward();
    }
    if (o.clip) out.last_norm = torch::nn::utils::clip_grad_norm_(model->parameters(), 0.5);
    optimizer.step();
  }
  out.params = snapshot(*model);
  return out;
}

void transformer(const std::string& strategy_name) {
  const auto strategy = acc::parse_sharding_strategy(strategy_name, "worker argument");
  const int world = std::atoi(std::getenv("WORLD_SIZE"));
  std::vector<Options> cases;
  cases.push_back({});
  cases.push_back({.prefetch = acc::BackwardPrefetch::NO_PREFETCH});
  cases.push_back({.prefetch = acc::BackwardPrefetch::BACKWARD_POST, .forward_prefetch = true});
  cases.push_back({.tied = true, .twice = true, .eval = true});
  cases.push_back({.accumulate = true});
  cases.push_back({.clip = true});
  cases.push_back({.bf16 = true});
  cases.push_back({.twice = true, .checkpoint = true});
  cases.push_back({.offload = true});
  cases.push_back({.fp16 = true});
  cases.push_back({.empty = true});
  for (const auto& o : cases) {
    const auto fsdp = train(strategy, o);
    const auto ddp = train(std::nullopt, o);
    const double to_ddp = max_abs_diff(fsdp.params, ddp.params);
    if (o.bf16) {
      // Both in bf16 compute: they agree as closely as bf16 allows, not to fp32's 1e-5.
      expect(to_ddp <= 2e-2, o.name() + ": " + strategy_name + " differs from DDP by " + std::to_string(to_ddp));
      std::cout << "ok " << o.name() << ": to DDP " << to_ddp << std::endl;
      continue;
    }
    const auto single = train_single(world, o);
    const double to_single = max_abs_diff(fsdp.params, single.params);
    // Summing gradients in another order is rounding noise that Adam amplifies in parameters whose
    // gradient is nearly zero (with accumulation DDP lands ~1e-5 from one process too): sharding
    // must not add more than 1e-5 to DDP's own distance.
    const double ddp_to_single = max_abs_diff(ddp.params, single.params);
    expect(to_single <= ddp_to_single + 1e-5,
           o.name() + ": " + strategy_name + " differs from one process by " + std::to_string(to_single) +
               ", DDP by " + std::to_string(ddp_to_single));
    expect(to_ddp <= 1e-5, o.name() + ": " + strategy_name + " differs from DDP by " + std::to_string(to_ddp));
    if (o.clip) {
      expect(single.last_norm > 0.5, "the clipping case did not clip");
      expect(std::abs(fsdp.last_norm - single.last_norm) <= 1e-5 * single.last_norm,
             "clip_grad_norm_ returned " + std::to_string(fsdp.last_norm) + ", one process " +
                 std::to_string(single.last_norm));
    }
    std::cout << "ok " << o.name() << ": to one process " << to_single << " (DDP " << ddp_to_single << "), to DDP "
              << to_ddp << std::endl;
  }
}

// A Sequential of plain layers: its children are units without any line in user code.
torch::nn::Sequential make_sequential() {
  return torch::nn::Sequential(torch::nn::Linear(12, 48), torch::nn::Tanh(), torch::nn::Linear(48, 48),
                               torch::nn::Tanh(), torch::nn::Linear(48, 3));
}

void sequential(const std::string& strategy_name) {
  const auto strategy = acc::parse_sharding_strategy(strategy_name, "worker argument");
  auto run = [&](bool fsdp, bool checkpointing) {
    auto options = acc::AcceleratorOptions();
    // Linear(12,48) and Linear(48,48) reach 600 parameters, the head does not: it stays in the root.
    if (fsdp) {
      options.fsdp_plugin(acc::FullyShardedDataParallelPlugin()
                              .sharding_strategy(strategy)
                              .auto_wrap_policy(acc::AutoWrapPolicy::SIZE_BASED_WRAP)
                              .min_num_params(600)
                              .activation_checkpointing(checkpointing));
    }
    acc::Accelerator accelerator(options);
    const int rank = accelerator.process_index(), world = accelerator.num_processes();
    torch::manual_seed(5 + rank);
    auto model = make_sequential();
    acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
    accelerator.prepare(model, optimizer);
    for (int step = 0; step < kSteps; ++step) {
      torch::manual_seed(step);
      auto x = torch::randn({world * 4, 12}).narrow(0, rank * 4, 4);
      auto y = torch::randn({world * 4, 3}).narrow(0, rank * 4, 4);
      accelerator.backward(torch::mse_loss(model->forward(x), y));
      optimizer.step();
      optimizer.zero_grad();
      if (fsdp && world > 1) {
        const int64_t whole = resident_bytes(model->parameters());
        const int64_t head = (48 * 3 + 3 + world - 1) / world * world * 4;  // padded to the shard count
        expect(whole == head, "between steps " + std::to_string(whole) +
                                  " bytes of full parameters stay; only the root's head (" + std::to_string(head) +
                                  ") should");
      }
    }
    auto full = accelerator.summon_full_params(model);
    return snapshot(*model);
  };
  const auto ddp = run(false, false);
  for (bool checkpointing : {false, true}) {
    const double diff = max_abs_diff(run(true, checkpointing), ddp);
    expect(diff <= 1e-5, "Sequential under " + strategy_name + (checkpointing ? " with activation checkpointing" : "") +
                             " differs from DDP by " + std::to_string(diff));
    std::cout << "ok sequential" << (checkpointing ? " checkpointed" : "") << ": to DDP " << diff << std::endl;
  }
}

// Checkpoints of a FULL_SHARD model: saved after 5 of 10 steps on one number of ranks, resumed on
// another, the result equals the uninterrupted run (which saved its final weights with save_model).
constexpr int64_t kGlobal = 8;
constexpr int kSaveAt = 5;

acc::Accelerator full_shard_accelerator(acc::StateDictType type) {
  return acc::Accelerator(acc::AcceleratorOptions().fsdp_plugin(
      acc::FullyShardedDataParallelPlugin()
          .sharding_strategy(acc::ShardingStrategy::FULL_SHARD)
          .state_dict_type(type)
          .auto_wrap_policy(acc::AutoWrapPolicy::TRANSFORMER_BASED_WRAP)
          .transformer_cls_names_to_wrap(std::vector<std::string>{"TransformerBlock"})));
}

void train_steps(acc::Accelerator& accelerator, TinyLm& model, torch::optim::Optimizer& optimizer, int from, int to) {
  const int rank = accelerator.process_index(), world = accelerator.num_processes();
  for (int step = from; step < to; ++step) {
    auto batch = tokens(step, 0, kGlobal).narrow(0, rank * (kGlobal / world), kGlobal / world);
    accelerator.backward(lm_loss(model, batch));
    optimizer.step();
    optimizer.zero_grad();
  }
}

void checkpoint_save(const std::string& type_name, const std::string& directory) {
  auto accelerator = full_shard_accelerator(acc::parse_state_dict_type(type_name, "worker argument"));
  torch::manual_seed(3);
  TinyLm model(false, false);
  acc::Optimizer<torch::optim::AdamW> optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  accelerator.prepare(model, optimizer);
  train_steps(accelerator, model, optimizer, 0, kSaveAt);
  accelerator.save_state(directory + "/checkpoint");
  train_steps(accelerator, model, optimizer, kSaveAt, kSteps);
  accelerator.save_model(model, directory + "/final");
  expect(resident_bytes(model->parameters()) == 0, "saving left units whole");
}

void checkpoint_resume(const std::string& type_name, const std::string& directory) {
  auto accelerator = full_shard_accelerator(acc::parse_state_dict_type(type_name, "worker argument"));
  torch::manual_seed(4);  // other weights: the checkpoint must replace them
  TinyLm model(false, false);
  acc::Optimizer<torch::optim::AdamW> optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  accelerator.prepare(model, optimizer);
  accelerator.load_state(directory + "/checkpoint");
  train_steps(accelerator, model, optimizer, kSaveAt, kSteps);
  expect(resident_bytes(model->parameters()) == 0, "units stayed whole after the resumed steps");
  TinyLm expected(false, false);
  acc::load_checkpoint_in_model(*expected, directory + "/final/model.safetensors", /*strict=*/true);
  auto whole = accelerator.summon_full_params(model, /*writeback=*/false);
  const double diff = max_abs_diff(snapshot(*model), snapshot(*expected));
  expect(diff <= 1e-5, type_name + " resumed on " + std::to_string(accelerator.num_processes()) +
                           " ranks differs from the uninterrupted run by " + std::to_string(diff));
  std::cout << "ok " << type_name << " resumed: " << diff << std::endl;
}

// A released unit used outside its seam is torch's error, not garbage or a crash.
void unseamed_use() {
  acc::Accelerator accelerator(acc::AcceleratorOptions().fsdp_plugin(
      acc::FullyShardedDataParallelPlugin()
          .sharding_strategy(acc::ShardingStrategy::FULL_SHARD)
          .auto_wrap_policy(acc::AutoWrapPolicy::TRANSFORMER_BASED_WRAP)
          .transformer_cls_names_to_wrap(std::vector<std::string>{"TransformerBlock"})));
  torch::manual_seed(1);
  TinyLm model(false, false);
  acc::Optimizer<torch::optim::AdamW> optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
  accelerator.prepare(model, optimizer);
  accelerator.backward(lm_loss(model, tokens(0, 0, kBatch)));
  optimizer.step();
  optimizer.zero_grad();
  bool threw = false;
  try {
    // The block's MLP, called around the block's forward (and so around its seam).
    auto y = model->blocks[1]->up->forward(torch::randn({2, kDim}));
    std::cout << "unexpected result " << y.sum().item<double>() << std::endl;
  } catch (const std::exception& e) {
    threw = true;
    std::cout << "ok unseamed use: " << std::string(e.what()).substr(0, 120) << std::endl;
  }
  expect(threw, "a released unit's layer ran outside the unit's seam without an error");
  // The seam still works afterwards.
  accelerator.backward(lm_loss(model, tokens(1, 0, kBatch)));
  optimizer.step();
}
// A unit type whose forward has no seam line (the common mistake): FULL_SHARD can never release it.
struct PlainBlockImpl : torch::nn::Module {
  PlainBlockImpl() {
    up = register_module("up", torch::nn::Linear(kDim, kHidden));
    down = register_module("down", torch::nn::Linear(kHidden, kDim));
  }
  torch::Tensor forward(torch::Tensor x) { return x + down->forward(torch::relu(up->forward(x))); }
  torch::nn::Linear up{nullptr}, down{nullptr};
};
TORCH_MODULE(PlainBlock);

struct PlainModelImpl : torch::nn::Module {
  PlainModelImpl() {
    for (int i = 0; i < 3; ++i) blocks.push_back(register_module("block" + std::to_string(i), PlainBlock()));
    head = register_module("head", torch::nn::Linear(kDim, 1));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& block : blocks) x = block->forward(x);
    return head->forward(x);
  }
  std::vector<PlainBlock> blocks;
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(PlainModel);

// Units whose forward never runs the seam: after the first step, a warning naming their type and the
// fix, once; with require_unit_seams(true), a ConfigError from that step on every rank. The second
// step prints nothing more. Prints "STEP N DONE" after each step that returned.
void unseamed_units(bool required) {
  acc::Accelerator accelerator(acc::AcceleratorOptions().fsdp_plugin(
      acc::FullyShardedDataParallelPlugin()
          .sharding_strategy(acc::ShardingStrategy::FULL_SHARD)
          .auto_wrap_policy(acc::AutoWrapPolicy::TRANSFORMER_BASED_WRAP)
          .transformer_cls_names_to_wrap(std::vector<std::string>{"PlainBlock"})
          .require_unit_seams(required)));
  torch::manual_seed(1);
  PlainModel model;
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  accelerator.prepare(model, optimizer);
  for (int step = 1; step <= 2; ++step) {
    torch::manual_seed(step);
    accelerator.backward(model->forward(torch::randn({4, kDim})).pow(2).mean());
    try {
      optimizer.step();
    } catch (const acc::ConfigError& e) {
      std::cout << "RAISED in step " << step << ": " << e.what() << std::endl;
      expect(required, "a ConfigError without require_unit_seams");
      return;
    }
    optimizer.zero_grad();
    std::cout << "STEP " << step << " DONE" << std::endl;
  }
  expect(!required, "require_unit_seams(true) and units that never ran the seam, but no error");
}

// A kB field of /proc/self/status in bytes.
int64_t status_bytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  fail("/proc/self/status has no " + field);
}

// FSDP_CPU_RAM_EFFICIENT_LOADING measured in memory: from before the model is built until after
// prepare, rank 0 (which builds and holds the whole model) peaks above the model's size, every other
// rank at most at its shards, one unit whole and some slack, well under the model.
void ram_efficient_peak() {
  acc::Accelerator accelerator(acc::AcceleratorOptions().fsdp_plugin(
      acc::FullyShardedDataParallelPlugin()
          .sharding_strategy(acc::ShardingStrategy::FULL_SHARD)
          .auto_wrap_policy(acc::AutoWrapPolicy::TRANSFORMER_BASED_WRAP)
          .transformer_cls_names_to_wrap(std::vector<std::string>{"Linear"})
          .cpu_ram_efficient_loading(true)));
  accelerator.wait_for_everyone();  // every rank's process group is up: what follows is the model
  {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";  // resets the peak (VmHWM) to what is resident now
  }
  const int64_t base = status_bytes("VmRSS");
  const int rank = accelerator.process_index(), world = accelerator.num_processes();
  constexpr int64_t kWidth = 1024, kLayers = 12;
  torch::nn::Sequential model;
  {
    acc::init_empty_weights empty(accelerator.cpu_ram_efficient_loading() && !accelerator.is_main_process());
    torch::manual_seed(3);
    for (int64_t i = 0; i < kLayers; ++i) {
      model->push_back(torch::nn::Linear(kWidth, kWidth));
      if (i == kLayers / 2) model->push_back(torch::nn::BatchNorm1d(kWidth));  // buffers come from rank 0 too
    }
  }
  std::cout << "rank " << rank << ": built, +" << ((status_bytes("VmRSS") - base) >> 20) << " MiB" << std::endl;
  auto norm = model[kLayers / 2 + 1]->as<torch::nn::BatchNorm1d>();
  if (rank == 0) norm->running_mean.fill_(3.0);
  const int64_t model_bytes = param_bytes(*model);
  const int64_t unit_bytes = param_bytes(*model[0]);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  accelerator.prepare(model, optimizer);
  const int64_t peak = status_bytes("VmHWM") - base;
  std::cout << "rank " << rank << ": after prepare +" << ((status_bytes("VmRSS") - base) >> 20) << " MiB" << std::endl;
  const int64_t bound = model_bytes / world + unit_bytes + (16 << 20);
  std::cout << "rank " << rank << ": peak " << (peak >> 20) << " MiB from building to prepare; the model is "
            << (model_bytes >> 20) << " MiB, a shard and a unit " << ((model_bytes / world + unit_bytes) >> 20)
            << " MiB" << std::endl;
  expect(bound < model_bytes, "the model is too small for this measurement to mean anything");
  if (rank == 0) {
    expect(peak >= model_bytes, "rank 0 holds the whole model, yet its peak grew by " + std::to_string(peak));
  } else {
    expect(peak <= bound, "rank " + std::to_string(rank) + " built the model empty, yet its peak grew by " +
                              std::to_string(peak >> 20) + " MiB (a shard, one unit and 16 MiB are " +
                              std::to_string(bound >> 20) + " MiB)");
  }
  expect(norm->running_mean.eq(3.0).all().item<bool>(), "the buffers are not rank 0's");
  // It trains: one step, and the loss of the next is finite.
  torch::manual_seed(4);
  auto input = torch::randn({8, kWidth});
  accelerator.backward(model->forward(input).pow(2).mean());
  optimizer.step();
  optimizer.zero_grad();
  expect(std::isfinite(model->forward(input).pow(2).mean().item<double>()), "the loss after a step is not finite");
}

// A model that nothing can fill is refused on every rank (none hangs), naming the rank and the fix.
void empty_weights_errors() {
  auto attempt = [](bool sync, int empty_rank, const std::string& expected) {
    acc::Accelerator accelerator(acc::AcceleratorOptions().fsdp_plugin(
        acc::FullyShardedDataParallelPlugin().sharding_strategy(acc::ShardingStrategy::FULL_SHARD).sync_module_states(sync)));
    TinyLm model = nullptr;
    {
      acc::init_empty_weights empty(accelerator.process_index() == empty_rank);
      model = TinyLm(false, false);
    }
    acc::Optimizer<torch::optim::AdamW> optimizer(model->parameters(), torch::optim::AdamWOptions(1e-3));
    try {
      accelerator.prepare(model, optimizer);
    } catch (const acc::ConfigError& e) {
      const std::string message = e.what();
      expect(message.find(expected) != std::string::npos, "error '" + message + "' lacks '" + expected + "'");
      std::cout << "ok: " << message << std::endl;
      return;
    }
    fail("prepare accepted a model built empty on rank " + std::to_string(empty_rank) + " (sync_module_states " +
         (sync ? "on" : "off") + ")");
  };
  attempt(true, 0, "has no values on rank 0");
  attempt(false, 1, "'position' has no values on rank 1");
  attempt(false, 1, "FSDP_SYNC_MODULE_STATES=true");
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (const char* local = std::getenv("ACC_TEST_LOCAL_WORLD_SIZE")) {
    ::setenv("LOCAL_WORLD_SIZE", local, 1);
    ::setenv("LOCAL_RANK", std::to_string(std::atoi(std::getenv("RANK")) % std::atoi(local)).c_str(), 1);
  }
  try {
    if (args.size() == 2 && args[0] == "transformer") {
      transformer(args[1]);
    } else if (args.size() == 2 && args[0] == "sequential") {
      sequential(args[1]);
    } else if (args.size() == 3 && args[0] == "checkpoint_save") {
      checkpoint_save(args[1], args[2]);
    } else if (args.size() == 3 && args[0] == "checkpoint_resume") {
      checkpoint_resume(args[1], args[2]);
    } else if (args.size() == 1 && args[0] == "unseamed_use") {
      unseamed_use();
    } else if (args.size() == 2 && args[0] == "unseamed_units") {
      unseamed_units(args[1] == "required");
    } else if (args.size() == 1 && args[0] == "ram_efficient_peak") {
      ram_efficient_peak();
    } else if (args.size() == 1 && args[0] == "empty_weights_errors") {
      empty_weights_errors();
    } else {
      fail("usage: acc_fsdp_full_shard_worker transformer|sequential STRATEGY | checkpoint_save|checkpoint_resume "
           "STATE_DICT_TYPE DIR | unseamed_use | unseamed_units warned|required | ram_efficient_peak | empty_weights_errors");
    }
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
  return 0;
}
