// The list of parallelism strategies (core/parallel_strategies.cpp) on one process: what each
// configuration builds, seen through the ParallelStrategy interface the Accelerator uses.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <acc/errors.h>
#include <acc/options.h>

#include "checkpoint/state_dict_layout.h"
#include "core/parallel_strategies.h"

namespace {

using acc::DistributedType;

struct Built {
  acc::ResolvedOptions resolved;
  acc::DistributedDataParallelKwargs ddp;
  std::unique_ptr<acc::detail::ParallelStrategy> strategy;
};

Built build(bool use_fsdp, bool cpu_ram_efficient_loading = false) {
  Built built;
  built.resolved.use_fsdp = use_fsdp;
  built.resolved.fsdp.cpu_ram_efficient_loading = cpu_ram_efficient_loading;
  built.strategy = acc::detail::make_parallel_strategy({built.resolved, built.ddp});
  return built;
}

TEST(ParallelStrategies, OneProcessWithoutFsdpIsPlain) {
  auto built = build(/*use_fsdp=*/false);
  EXPECT_EQ(built.strategy->distributed_type(DistributedType::NO), DistributedType::NO);
  EXPECT_FALSE(built.strategy->cpu_ram_efficient_loading());
  EXPECT_TRUE(built.strategy->make_state_dict_layout()->whole_tensors());
  torch::nn::Linear model(3, 2);
  EXPECT_EQ(built.strategy->prepare_model(*model, {"", torch::kCPU}), nullptr);
}

// FSDP wraps the one-process strategy: models stay whole, but checkpoints take FSDP's layout and
// the distributed type and cpu_ram_efficient_loading are FSDP's.
TEST(ParallelStrategies, FsdpOnOneProcessKeepsItsLayoutAndProperties) {
  auto built = build(/*use_fsdp=*/true, /*cpu_ram_efficient_loading=*/true);
  EXPECT_EQ(built.strategy->distributed_type(DistributedType::NO), DistributedType::NO);
  EXPECT_EQ(built.strategy->distributed_type(DistributedType::MULTI_CPU), DistributedType::FSDP);
  EXPECT_TRUE(built.strategy->cpu_ram_efficient_loading());
  EXPECT_FALSE(built.strategy->make_state_dict_layout()->whole_tensors());
  torch::nn::Linear model(3, 2);
  EXPECT_EQ(built.strategy->prepare_model(*model, {"", torch::kCPU}), nullptr);
  // One process has nobody to take a plain optimizer's parameters from, so FSDP accepts it here.
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  EXPECT_EQ(built.strategy->prepare_optimizer(optimizer, nullptr), nullptr);
}

TEST(ParallelStrategies, OneProcessRefusesAModelBuiltEmpty) {
  for (bool use_fsdp : {false, true}) {
    auto built = build(use_fsdp);
    torch::nn::Linear model(3, 2);
    try {
      built.strategy->prepare_model(*model, {"weight", torch::kCPU});
      ADD_FAILURE() << "a model built empty was accepted (use_fsdp " << use_fsdp << ")";
    } catch (const acc::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("'weight' has no values"), std::string::npos) << e.what();
    }
  }
}

TEST(ParallelStrategies, OneProcessClipsAsTorchDoes) {
  for (bool use_fsdp : {false, true}) {
    auto built = build(use_fsdp);
    auto p = torch::zeros({4}, torch::requires_grad());
    p.mutable_grad() = torch::full({4}, 3.0);
    EXPECT_DOUBLE_EQ(built.strategy->clip_grad_norm_({p}, 1.0, 2.0), 6.0);
    EXPECT_NEAR(p.grad().norm().item<double>(), 1.0, 1e-5);
    built.strategy->clip_grad_value_({p}, 0.1);
    EXPECT_LE(p.grad().abs().max().item<double>(), 0.1 + 1e-7);
  }
}

}  // namespace
