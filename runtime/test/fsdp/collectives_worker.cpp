// One rank of the tests of FSDP's communication (started by fsdp_test.cpp through spawn_ranks):
// the flat reduce-scatter and all-gather rings (comm/ring_collectives.h) agree with Gloo's own
// collectives computed in the same run, and a dead or stalled peer, in a ring or in
// SHARD_GRAD_OP training, becomes an acc::DistributedError instead of a hang.
// Exits 0 when every check passed; prints "FAIL: ..." and exits 1 otherwise.
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <acc/acc.h>

#include "worker_checks.h"
#include "comm/process_group.h"

namespace {

using acc::testing::expect;
using acc::testing::fail;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Rank `rank`'s data for case `id`: small integers, so that every sum is exact in every dtype
// whatever order the ranks are added in.
at::Tensor data_of(int rank, int id, int64_t numel, at::ScalarType dtype) {
  at::manual_seed(1000 * id + rank);
  return at::randint(-8, 9, {numel}).to(dtype);
}

// Chunk `r` of `size` equal chunks of 1-D `t` (also when `t` is empty, where chunk() gives one).
at::Tensor chunk_of(const at::Tensor& t, int r, int size) {
  const int64_t n = t.numel() / size;
  return t.narrow(0, r * n, n);
}

struct Case {
  int id;
  int64_t numel;
  at::ScalarType dtype;
  at::Tensor input, output, flat;
  c10::intrusive_ptr<c10d::Work> reduce_scatter, all_gather;
};

// Every ring launched before any is waited for (FIFO order and tags are what is tested), then
// each compared with Gloo's all-reduce of the same data (reduce-scatter) and with the chunks
// every rank's data would give (all-gather).
void agree() {
  acc::Accelerator accelerator;
  auto& group = *accelerator.state().process_group();
  const int rank = group.rank(), world = group.size();
  std::vector<Case> cases;
  int id = 0;
  for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kBFloat16}) {
    // 700001 per rank: several of the ring's 1 MiB segments and a partial one, in every dtype.
    for (int64_t per_rank : {0, 1, 1000, 5003, 700001}) cases.push_back({id++, per_rank * world, dtype, {}, {}, {}, {}, {}});
  }
  const auto before = group.num_collectives();
  for (auto& c : cases) {
    c.input = data_of(rank, c.id, c.numel, c.dtype);
    c.output = at::full({c.numel / world}, -99, at::TensorOptions().dtype(c.dtype));
    c.flat = at::full({c.numel}, -99, at::TensorOptions().dtype(c.dtype));
    chunk_of(c.flat, rank, world).copy_(chunk_of(data_of(rank, c.id, c.numel, c.dtype), rank, world));
    c.reduce_scatter = group.reduce_scatter_flat(c.output, c.input.clone());
    c.all_gather = group.all_gather_flat(c.flat);
  }
  expect(group.num_collectives() - before == 2 * cases.size(), "every ring counts as a collective");
  for (auto& c : cases) {
    const std::string what = "case " + std::to_string(c.id) + " (" + std::string(c10::toString(c.dtype)) +
                             ", " + std::to_string(c.numel) + " elements)";
    group.wait(c.reduce_scatter, "ring reduce-scatter " + what, std::chrono::seconds(60));
    group.wait(c.all_gather, "ring all-gather " + what, std::chrono::seconds(60));
    auto sum = c.input.clone();
    group.all_reduce_(sum, c10d::ReduceOp::SUM, "reference all-reduce");
    expect(at::equal(c.output, chunk_of(sum, rank, world)), "reduce-scatter differs from Gloo's all-reduce, " + what);
    std::vector<at::Tensor> chunks;
    for (int r = 0; r < world; ++r) chunks.push_back(chunk_of(data_of(r, c.id, c.numel, c.dtype), r, world));
    expect(at::equal(c.flat, at::cat(chunks)), "all-gather differs from every rank's chunk, " + what);
  }
  // Random floats: sums in another order than Gloo's, equal to rounding.
  at::manual_seed(rank);
  auto input = at::randn({world * 100003});
  auto output = at::empty({100003});
  group.wait(group.reduce_scatter_flat(output, input.clone()), "ring reduce-scatter", std::chrono::seconds(60));
  group.all_reduce_(input, c10d::ReduceOp::SUM, "reference all-reduce");
  const double diff = (output - chunk_of(input, rank, world)).abs().max().item<double>();
  expect(diff <= 1e-5, "reduce-scatter of random floats differs from Gloo's all-reduce by " + std::to_string(diff));
  std::cout << "ok: " << cases.size() << " cases on " << world << " ranks; random floats within " << diff
            << std::endl;
  accelerator.end_training();
}

// Rank 1 exits (or stalls past the 3 s deadline) after one good ring; rank 0's next ring fails
// within seconds, and so does the one queued behind it.
void ring_peer_failure(bool stall) {
  acc::Accelerator accelerator(acc::AcceleratorOptions().timeout(std::chrono::seconds(3)));
  auto& group = *accelerator.state().process_group();
  auto flat = at::full({2 * 1000}, static_cast<float>(group.rank()));
  group.wait(group.all_gather_flat(flat), "first ring", std::chrono::seconds(60));
  if (group.rank() == 1) {
    if (stall) std::this_thread::sleep_for(std::chrono::seconds(6));
    std::_Exit(stall ? 4 : 3);
  }
  const auto start = Clock::now();
  auto first = group.reduce_scatter_flat(at::empty({1000}), at::ones({2000}));
  auto second = group.all_gather_flat(flat);
  for (const auto& work : {first, second}) {
    try {
      group.wait(work, "ring after the peer left", group.timeout_for(flat));
      fail("a ring completed without its peer");
    } catch (const acc::DistributedError& e) {
      std::cout << "raised after " << seconds_since(start) << " s: " << e.what() << std::endl;
    }
  }
  expect(seconds_since(start) < 10, "the rings took " + std::to_string(seconds_since(start)) + " s to fail");
  std::_Exit(0);  // the peer is gone: leaving the process group would wait for it
}

// A process group destroyed while its ring waits for a peer that never joins returns within
// seconds (not the 30-minute default timeout), and the ring's work reports the shutdown.
void shutdown_with_ring_in_flight() {
  acc::Accelerator accelerator;
  auto& group = *accelerator.state().process_group();
  auto pair = group.subgroup({0, 1}, "ring-shutdown");
  c10::intrusive_ptr<c10d::Work> work;
  if (pair->rank() == 0) work = pair->all_gather_flat(at::zeros({2 * 1000}));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto start = Clock::now();
  pair.reset();
  expect(seconds_since(start) < 10, "destroying the group took " + std::to_string(seconds_since(start)) + " s");
  if (work) {
    try {
      work->wait(std::chrono::seconds(5));
      fail("a ring without its peer completed");
    } catch (const std::exception& e) {
      expect(std::string(e.what()).find("shut down") != std::string::npos,
             std::string("the ring failed, but not for the shutdown: ") + e.what());
    }
  }
  group.barrier("after the shutdown");
  std::cout << "ok: destroyed in " << seconds_since(start) << " s" << std::endl;
  accelerator.end_training();
}

// SHARD_GRAD_OP training: rank 1 exits (or stalls) at step 2; rank 0 gets DistributedError.
void training_peer_failure(bool stall) {
  acc::Accelerator accelerator(
      acc::AcceleratorOptions().timeout(std::chrono::seconds(3)).fsdp_plugin(
          acc::FullyShardedDataParallelPlugin().sharding_strategy(acc::ShardingStrategy::SHARD_GRAD_OP)));
  torch::manual_seed(1);
  torch::nn::Sequential model(torch::nn::Linear(8, 16), torch::nn::Linear(16, 1));
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), torch::optim::AdamOptions(1e-3));
  accelerator.prepare(model, optimizer);
  const auto start = Clock::now();
  try {
    for (int step = 0; step < 1000; ++step) {
      if (step == 2 && accelerator.process_index() == 1) {
        if (stall) std::this_thread::sleep_for(std::chrono::seconds(6));
        std::_Exit(stall ? 4 : 3);
      }
      optimizer.zero_grad();
      accelerator.backward(model->forward(torch::randn({4, 8})).sum());
      optimizer.step();
    }
  } catch (const acc::DistributedError& e) {
    std::cout << "raised after " << seconds_since(start) << " s: " << e.what() << std::endl;
    std::_Exit(seconds_since(start) < 10 ? 0 : 1);
  }
  fail("training went on although a peer was gone");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const bool stall = args.size() == 2 && args[1] == "stall";
  try {
    if (args.size() == 1 && args[0] == "agree") {
      agree();
    } else if (!args.empty() && args[0] == "ring_peer_failure") {
      ring_peer_failure(stall);
    } else if (args.size() == 1 && args[0] == "shutdown_with_ring_in_flight") {
      shutdown_with_ring_in_flight();
    } else if (!args.empty() && args[0] == "training_peer_failure") {
      training_peer_failure(stall);
    } else {
      fail("usage: acc_fsdp_collectives_worker agree|ring_peer_failure [stall]|"
           "shutdown_with_ring_in_flight|training_peer_failure [stall]");
    }
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
  return 0;
}
