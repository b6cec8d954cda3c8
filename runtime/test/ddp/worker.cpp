// Runs one multi-process scenario as one rank (started by spawn_ranks with torchrun's variables).
// Exits 0 when every check passed; prints "FAIL: ..." and exits 1 otherwise. The parent test
// (ddp_test.cpp) checks exit codes and output.
#include <torch/torch.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <thread>

#include <acc/acc.h>

#include "worker_checks.h"

namespace {

using acc::testing::expect;
using acc::testing::fail;

int env_int(const char* name) { return std::atoi(std::getenv(name)); }

// `hidden` 1024 gives the middle layer a 4 MiB gradient, which the reducer all-reduces in place
// (no bucket) while the others share buckets.
torch::nn::Sequential make_mlp(int64_t hidden = 16) {
  return torch::nn::Sequential(torch::nn::Linear(8, hidden), torch::nn::Tanh(),
                               torch::nn::Linear(hidden, hidden), torch::nn::Tanh(),
                               torch::nn::Linear(hidden, 4));
}

double max_abs_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  }
  return worst;
}

// Every rank's copy of `tensors`, flattened, must be bitwise equal.
void expect_equal_across_ranks(acc::Accelerator& accelerator,
                               const std::vector<torch::Tensor>& tensors, const std::string& what) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.detach().reshape({1, -1}));
  auto all = accelerator.gather(torch::cat(flat, 1));
  for (int64_t r = 1; r < all.size(0); ++r) {
    expect(torch::equal(all[r], all[0]), what + ": rank " + std::to_string(r) + " differs from rank 0");
  }
}

std::vector<torch::Tensor> grads_of(torch::nn::Module& m) {
  std::vector<torch::Tensor> grads;
  for (auto& p : m.parameters()) grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return grads;
}

void copy_weights(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto src = from.parameters();
  auto dst = to.parameters();
  for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
}

// After several SGD steps under DDP, with ranks initialised from different seeds, every rank
// equals a single-process run (rank 0's initial weights) on the concatenated global batch.
void ddp_equivalence(const std::vector<std::string>& args) {
  const double cap_mb = args.empty() ? 25.0 : std::stod(args[0]);
  const int64_t hidden = args.size() > 1 && args[1] == "large" ? 1024 : 16;
  acc::Accelerator accelerator(
      acc::AcceleratorOptions().ddp(acc::DistributedDataParallelKwargs().bucket_cap_mb(cap_mb)));
  const int rank = accelerator.process_index(), world = accelerator.num_processes();
  const int64_t batch = 5;

  torch::manual_seed(100 + rank);
  auto model = make_mlp(hidden);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  accelerator.prepare(model, optimizer);
  accelerator.prepare(model, optimizer);  // a second prepare is a no-op

  torch::manual_seed(100);
  auto reference = make_mlp(hidden);
  torch::optim::SGD reference_optimizer(reference->parameters(), torch::optim::SGDOptions(0.1));
  expect(max_abs_diff(model->parameters(), reference->parameters()) == 0,
         "prepare did not broadcast rank 0's weights");

  for (int step = 0; step < 5; ++step) {
    torch::manual_seed(1000 + step);
    auto x = torch::randn({world * batch, 8});
    auto y = torch::randn({world * batch, 4});
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(x.narrow(0, rank * batch, batch)),
                                y.narrow(0, rank * batch, batch));
    accelerator.backward(loss);
    optimizer.step();

    reference_optimizer.zero_grad();
    torch::mse_loss(reference->forward(x), y).backward();
    reference_optimizer.step();
  }
  double diff = max_abs_diff(model->parameters(), reference->parameters());
  expect(diff <= 1e-6, "parameters differ from the single-process run by " + std::to_string(diff));
  expect_equal_across_ranks(accelerator, model->parameters(), "parameters after training");
  std::cout << "ok: max difference to single process " << diff << std::endl;
}

// DDP's average rounds as torch DDP's: a gradient made by this backward is multiplied by 1/world on
// its way into its bucket; one kept as its bucket's view since the last step (gradient_as_bucket_view
// with zero_grad(set_to_none=false)) is divided by world in place. Every rank trains on the same
// batch, so each element sums world equal shares, whose sum on 3 ranks is the same in any order:
// the reduced gradient must equal that sum of the local gradient's share bit for bit (g * (1/3) and
// g / 3 differ in about a third of the elements). The model has a 4 MiB gradient (reduced in place)
// besides bucketed ones. args: "" (zero_grad()), "view" (gradient_as_bucket_view,
// zero_grad(false)), "view_none" (gradient_as_bucket_view, zero_grad()).
void average_rounding(const std::vector<std::string>& args) {
  const std::string mode = args.empty() ? "" : args[0];
  const bool view = mode == "view" || mode == "view_none", keep = mode == "view";
  acc::Accelerator accelerator(
      acc::AcceleratorOptions().ddp(acc::DistributedDataParallelKwargs().gradient_as_bucket_view(view)));
  const int world = accelerator.num_processes();
  torch::manual_seed(0);
  auto model = make_mlp(1024);
  auto reference = make_mlp(1024);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  accelerator.prepare(model, optimizer);
  for (int step = 0; step < 3; ++step) {
    copy_weights(*model, *reference);
    torch::manual_seed(10 + step);
    auto x = torch::randn({6, 8}), y = torch::randn({6, 4});
    optimizer.zero_grad(/*set_to_none=*/!keep);  // libtorch's zero_grad detach_()es: no view may reach it
    accelerator.backward(torch::mse_loss(model->forward(x), y));
    reference->zero_grad();
    torch::mse_loss(reference->forward(x), y).backward();
    const bool divided = keep && step > 0;  // the gradients are their buckets' views from the second step
    auto params = model->parameters(), local = reference->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      const auto share = divided ? local[i].grad() / world : torch::mul(local[i].grad(), 1.0 / world);
      auto expected = share.clone();
      for (int r = 1; r < world; ++r) expected = expected + share;
      expect(torch::equal(params[i].grad(), expected),
             "step " + std::to_string(step) + ", parameter " + std::to_string(i) + ": the average is not " +
                 (divided ? "the sum of gradient / world" : "the sum of gradient * (1 / world)") + " (" +
                 std::to_string((params[i].grad() != expected).sum().item<int64_t>()) + " of " +
                 std::to_string(expected.numel()) + " elements differ)");
    }
    optimizer.step();
  }
  std::cout << "ok: averages rounded as torch DDP's over 3 steps (" << (mode.empty() ? "plain" : mode) << ")"
            << std::endl;
}

// A module whose buffer records which rank ran the forward.
struct TaggedImpl : torch::nn::Module {
  TaggedImpl() {
    linear = register_module("linear", torch::nn::Linear(4, 2));
    tag = register_buffer("tag", torch::zeros({3}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    {
      torch::NoGradGuard no_grad;
      tag.fill_(acc::PartialState().process_index() + 1);
    }
    return linear->forward(x);
  }
  torch::nn::Linear linear{nullptr};
  torch::Tensor tag;
};
TORCH_MODULE(Tagged);

void buffers(const std::vector<std::string>& args) {
  const bool broadcast = args.empty() || args[0] != "off";
  acc::Accelerator accelerator(acc::AcceleratorOptions().ddp(
      acc::DistributedDataParallelKwargs().broadcast_buffers(broadcast)));
  Tagged model;
  accelerator.prepare(model);
  auto loss = model->forward(torch::ones({2, 4})).sum();
  accelerator.backward(loss);
  const float expected = broadcast ? 1.0f : accelerator.process_index() + 1.0f;
  expect(model->tag.eq(expected).all().item<bool>(),
         "buffer after backward is " + std::to_string(model->tag[0].item<float>()) + ", expected " +
             std::to_string(expected));
  std::cout << "ok" << std::endl;
}

// Inside no_sync gradients stay local; the next synchronising backward averages the accumulated
// sum over ranks.
void no_sync(const std::vector<std::string>&) {
  acc::Accelerator accelerator;
  const int rank = accelerator.process_index();
  torch::manual_seed(7);
  auto model = std::make_shared<torch::nn::LinearImpl>(6, 3);
  accelerator.prepare(model);
  auto shadow = std::make_shared<torch::nn::LinearImpl>(6, 3);
  copy_weights(*model, *shadow);

  torch::manual_seed(50 + rank);
  auto x1 = torch::randn({4, 6}), x2 = torch::randn({4, 6});
  {
    auto guard = accelerator.no_sync(model);
    accelerator.backward(model->forward(x1).pow(2).mean());
  }
  shadow->forward(x1).pow(2).mean().backward();
  expect(max_abs_diff(grads_of(*model), grads_of(*shadow)) == 0,
         "gradients inside no_sync were changed (communicated?)");
  auto local = accelerator.gather(grads_of(*model)[0].reshape({1, -1}));
  expect(!torch::equal(local[0], local[1]), "gradients inside no_sync are equal across ranks");

  accelerator.backward(model->forward(x2).pow(2).mean());
  shadow->forward(x2).pow(2).mean().backward();
  auto expected = accelerator.reduce(grads_of(*shadow), "mean");
  double diff = max_abs_diff(grads_of(*model), expected);
  expect(diff <= 1e-6, "gradient after the syncing step differs from the mean of the accumulated "
                       "local gradients by " + std::to_string(diff));
  std::cout << "ok" << std::endl;
}

// head_b's weight is 4 MiB: all-reduced in place where it has a gradient (rank 0) and from storage
// of the reducer's own where it has none (rank 1, find_unused_parameters).
struct HeadsImpl : torch::nn::Module {
  HeadsImpl() {
    trunk = register_module("trunk", torch::nn::Linear(4, 4));
    head_a = register_module("head_a", torch::nn::Linear(4, 1));
    head_b = register_module("head_b", torch::nn::Linear(4, 262144));
    head_c = register_module("head_c", torch::nn::Linear(4, 1));
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_b) {
    auto h = trunk->forward(x);
    auto out = head_a->forward(h);
    return use_b ? out + head_b->forward(h).sum(-1, /*keepdim=*/true) : out;
  }
  torch::nn::Linear trunk{nullptr}, head_a{nullptr}, head_b{nullptr}, head_c{nullptr};
};
TORCH_MODULE(Heads);

void unused(const std::vector<std::string>&) {
  acc::Accelerator strict;
  torch::manual_seed(3);
  Heads model;
  strict.prepare(model);
  try {
    strict.backward(model->forward(torch::ones({2, 4}), true).sum());
    fail("a parameter without gradient was not reported");
  } catch (const acc::DistributedError& e) {
    std::string message = e.what();
    expect(message.find("head_c.weight") != std::string::npos &&
               message.find("find_unused_parameters") != std::string::npos,
           "unhelpful unused-parameter error: " + message);
    std::cout << "strict: " << message << std::endl;
  }

  acc::Accelerator lenient(acc::AcceleratorOptions().ddp(
      acc::DistributedDataParallelKwargs().find_unused_parameters(true)));
  Heads relaxed;
  lenient.prepare(relaxed);
  Heads shadow;
  copy_weights(*relaxed, *shadow);
  const bool use_b = lenient.process_index() == 0;  // head_b is used on rank 0 only
  auto x = torch::randn({3, 4}) + lenient.process_index();
  lenient.backward(relaxed->forward(x, use_b).sum());
  shadow->forward(x, use_b).sum().backward();
  auto expected = lenient.reduce(grads_of(*shadow), "mean");
  auto params = relaxed->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& name = params[i].key();
    const auto& grad = params[i].value().grad();
    if (name.rfind("head_c", 0) == 0) {
      expect(!grad.defined(), name + " was used by no rank but has a gradient");
    } else {
      expect(grad.defined(), name + " has no gradient");
      double diff = (grad - expected[i]).abs().max().item<double>();
      expect(diff <= 1e-6, name + " gradient off by " + std::to_string(diff));
    }
  }
  std::cout << "ok" << std::endl;
}

void mismatch(const std::vector<std::string>&) {
  acc::Accelerator accelerator;
  const int width = accelerator.process_index() == 1 ? 17 : 16;
  auto model = torch::nn::Sequential(torch::nn::Linear(8, width), torch::nn::Linear(width, 2));
  try {
    accelerator.prepare(model);
  } catch (const acc::DistributedError& e) {
    std::cout << "caught: " << e.what() << std::endl;
    return;
  }
  fail("prepare accepted models that differ between ranks");
}

// Rank 1 dies (or stalls) after two steps; rank 0 must raise within the configured timeout.
void peer_failure(const std::vector<std::string>& args) {
  const bool stall = !args.empty() && args[0] == "stall";
  acc::Accelerator accelerator(acc::AcceleratorOptions().timeout(std::chrono::seconds(3)));
  torch::manual_seed(1);
  auto model = make_mlp();
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.01);
  accelerator.prepare(model, optimizer);
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int step = 0; step < 1000; ++step) {
      if (step == 2 && accelerator.process_index() == 1) {
        if (!stall) std::_Exit(3);
        std::this_thread::sleep_for(std::chrono::seconds(6));
        std::_Exit(4);
      }
      optimizer.zero_grad();
      accelerator.backward(model->forward(torch::randn({4, 8})).sum());
      optimizer.step();
    }
  } catch (const acc::DistributedError& e) {
    auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "raised after " << seconds << " s: " << e.what() << std::endl;
    std::_Exit(seconds < 10 ? 0 : 1);
  }
  fail("training went on although a peer was gone");
}

void collectives(const std::vector<std::string>& args) {
  acc::Accelerator accelerator;
  const int rank = accelerator.process_index(), world = accelerator.num_processes();

  auto gathered = accelerator.gather(torch::full({2, 3}, static_cast<float>(rank)));
  expect(gathered.sizes() == torch::IntArrayRef({2 * world, 3}), "gather shape");
  for (int r = 0; r < world; ++r) expect(gathered[2 * r + 1][0].item<float>() == r, "gather rank order");
  auto scalar = accelerator.gather(torch::tensor(static_cast<int64_t>(rank)));
  expect(scalar.sizes() == torch::IntArrayRef({world}), "0-d gather must give [world]");

  std::map<std::string, std::vector<torch::Tensor>> nested{{"a", {torch::ones({1}) * rank}}};
  auto nested_out = accelerator.gather(nested);
  expect(nested_out["a"][0].size(0) == world, "nested gather");

  try {
    accelerator.gather(torch::zeros({rank + 1}));
    fail("gather accepted different shapes");
  } catch (const acc::DistributedError& e) {
    expect(std::string(e.what()).find("pad_across_processes") != std::string::npos,
           "shape mismatch error must point to pad_across_processes");
  }
  auto padded = accelerator.pad_across_processes(torch::ones({rank + 1, 2}), 0, -1);
  expect(padded.size(0) == world && padded[world - 1][0].item<float>() == (rank == world - 1 ? 1 : -1),
         "pad_across_processes");
  auto first = accelerator.pad_across_processes(torch::ones({rank + 1}), 0, 0, /*pad_first=*/true);
  expect(first[0].item<float>() == (rank == world - 1 ? 1 : 0), "pad_first");

  auto value = torch::tensor({static_cast<float>(rank + 1)});
  expect(accelerator.reduce(value, "sum").item<float>() == world * (world + 1) / 2.0f, "reduce sum");
  expect(accelerator.reduce(value, "mean").item<float>() == (world + 1) / 2.0f, "reduce mean");
  expect(accelerator.reduce(value, "max", 2.0).item<float>() == 2.0f * world, "reduce max scaled");
  expect(accelerator.reduce(value, acc::ReduceOp::SUM).item<float>() == world * (world + 1) / 2.0f,
         "reduce ReduceOp::SUM");
  expect(accelerator.reduce(value, acc::ReduceOp::MEAN).item<float>() == (world + 1) / 2.0f, "reduce ReduceOp::MEAN");
  expect(acc::reduce(value, acc::ReduceOp::MAX, 2.0).item<float>() == 2.0f * world, "reduce ReduceOp::MAX scaled");
  expect(accelerator.broadcast(value, world - 1).item<float>() == world, "broadcast");
  // Numbers (a count, a running loss) reduce in their own type.
  const int64_t count = rank + 1;
  expect(accelerator.reduce(count, "sum") == world * (world + 1) / 2, "reduce of an int64_t count");
  const double loss = 0.25 * (rank + 1);
  expect(accelerator.reduce(loss, "mean") == 0.25 * (world + 1) / 2.0, "reduce of a double, mean");
  expect(accelerator.reduce(1.5f, acc::ReduceOp::MAX, 2.0) == 3.0f, "reduce of a float, max scaled");
  expect(accelerator.reduce(static_cast<int>(rank == 0 ? 3 : 0), "max") == 3, "reduce of an int, max");

  std::vector<int> items(7);
  std::iota(items.begin(), items.end(), 0);
  auto share = accelerator.split_between_processes(items, true);
  auto all = accelerator.gather(torch::tensor(std::vector<int64_t>(share.begin(), share.end())));
  expect(all.size(0) == world * ((7 + world - 1) / world), "split with padding: equal shares");

  if (rank == world - 1) accelerator.set_trigger();
  expect(accelerator.check_trigger(), "check_trigger misses another rank's trigger");
  expect(!accelerator.check_trigger(), "check_trigger did not reset");

  // main_process_first: the others enter only after the main process left the block.
  const std::string marker = args.at(0);
  {
    auto guard = accelerator.main_process_first();
    if (accelerator.is_main_process()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::ofstream(marker) << "main was here";
    } else {
      expect(std::filesystem::exists(marker), "main_process_first: entered before the main process");
    }
  }
  accelerator.wait_for_everyone();
  accelerator.print("printed-by-print ", rank);
  accelerator.end_training();
  std::cout << "ok" << std::endl;
}

// A plain scheduler with several processes must be declared acc::Scheduler (the fix is named).
void scheduler_rules(const std::vector<std::string>&) {
  acc::Accelerator accelerator;
  auto model = torch::nn::Linear(2, 2);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 1.0);
  torch::optim::StepLR plain(optimizer, 1, 0.5);
  try {
    accelerator.prepare(model, optimizer, plain);
    fail("a plain scheduler was accepted with several processes");
  } catch (const acc::ConfigError& e) {
    expect(std::string(e.what()).find("acc::Scheduler<") != std::string::npos, "fix not named");
  }
  acc::Scheduler<torch::optim::StepLR> scheduler(optimizer, 1, 0.5);
  accelerator.prepare(scheduler);
  torch::optim::SGD reference_optimizer({torch::ones({1}, torch::requires_grad())}, 1.0);
  torch::optim::StepLR reference(reference_optimizer, 1, 0.5);
  for (int call = 0; call < 2; ++call) {
    optimizer.step();
    scheduler.step();
    // One prepared step covers num_processes batches of the unsharded loader.
    for (int i = 0; i < accelerator.num_processes(); ++i) reference.step();
  }
  double lr = optimizer.param_groups()[0].options().get_lr();
  double expected = reference_optimizer.param_groups()[0].options().get_lr();
  expect(std::abs(lr - expected) < 1e-12, "scheduler stepped to lr " + std::to_string(lr));

  // The explicit way out: one scheduler step per optimizer step.
  acc::Accelerator once(acc::AcceleratorOptions().scheduler_steps_per_process(false));
  acc::Optimizer<torch::optim::SGD> optimizer2(model->parameters(), 1.0);
  acc::Scheduler<torch::optim::StepLR> scheduler2(optimizer2, 1, 0.5);
  once.prepare(optimizer2, scheduler2);
  torch::optim::SGD reference_optimizer2({torch::ones({1}, torch::requires_grad())}, 1.0);
  torch::optim::StepLR reference2(reference_optimizer2, 1, 0.5);
  for (int call = 0; call < 3; ++call) {
    optimizer2.step();
    scheduler2.step();
    reference2.step();
  }
  expect(optimizer2.param_groups()[0].options().get_lr() ==
             reference_optimizer2.param_groups()[0].options().get_lr(),
         "scheduler_steps_per_process(false) must step once per call");
  std::cout << "ok" << std::endl;
}

// Gradient accumulation under DDP: N micro-batches per rank give one step on the global batch of
// N * b * world samples, and the non-sync micro-batches issue no collective at all.
void accumulation(const std::vector<std::string>& args) {
  const int64_t n = 4, b = 2;
  const bool each_batch = !args.empty() && args[0] == "sync_each_batch";
  acc::Accelerator accelerator(acc::AcceleratorOptions().gradient_accumulation_steps(n).gradient_accumulation_plugin(
      acc::GradientAccumulationPlugin().sync_each_batch(each_batch)));
  const int rank = accelerator.process_index(), world = accelerator.num_processes();
  torch::manual_seed(100 + rank);
  auto model = make_mlp(1024);  // its 4 MiB gradient accumulates, then is reduced in place
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  torch::manual_seed(100);
  auto reference = make_mlp(1024);
  torch::optim::SGD reference_optimizer(reference->parameters(), 0.1);

  for (int step = 0; step < 3; ++step) {
    torch::manual_seed(1000 + step);
    auto x = torch::randn({n * world * b, 8});
    auto y = torch::randn({n * world * b, 4});
    for (int64_t micro = 0; micro < n; ++micro) {
      // Micro-batch `micro` of rank r: rows [(micro * world + r) * b, ... + b).
      const int64_t start = (micro * world + rank) * b;
      const auto before = accelerator.state().num_collectives();
      {
        auto guard = accelerator.accumulate(model);
        accelerator.backward(torch::mse_loss(model->forward(x.narrow(0, start, b)), y.narrow(0, start, b)));
        optimizer.step();
        optimizer.zero_grad();
      }
      const auto issued = accelerator.state().num_collectives() - before;
      if (micro < n - 1 && !each_batch) {
        expect(issued == 0, "a non-sync micro-step issued " + std::to_string(issued) + " collectives");
      } else if (each_batch) {
        expect(issued > 0, "sync_each_batch: micro-step " + std::to_string(micro) + " did not communicate");
      } else {
        expect(issued > 0, "the sync step issued no collective");
      }
    }
    reference_optimizer.zero_grad();
    torch::mse_loss(reference->forward(x), y).backward();
    reference_optimizer.step();
  }
  double diff = max_abs_diff(model->parameters(), reference->parameters());
  expect(diff <= 1e-6, "accumulated DDP differs from one step on the global batch by " + std::to_string(diff));
  expect_equal_across_ranks(accelerator, model->parameters(), "parameters after accumulation");
  std::cout << "ok: max difference " << diff << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, std::function<void(const std::vector<std::string>&)>> scenarios{
      {"ddp_equivalence", ddp_equivalence}, {"buffers", buffers},
      {"no_sync", no_sync},                 {"unused", unused},
      {"mismatch", mismatch},               {"peer_failure", peer_failure},
      {"collectives", collectives},         {"scheduler_rules", scheduler_rules},
      {"accumulation", accumulation},       {"average_rounding", average_rounding}};
  if (argc < 2 || !scenarios.count(argv[1])) {
    std::cerr << "usage: acc_mp_worker <scenario> [args]\n";
    return 2;
  }
  try {
    scenarios.at(argv[1])(std::vector<std::string>(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    fail(std::string("uncaught exception: ") + e.what());
  }
  return 0;
}
