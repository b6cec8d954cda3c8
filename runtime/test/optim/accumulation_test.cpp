// Gradient accumulation on one process: N micro-batches through accumulate() give the parameters
// of one step on the whole batch; the optimizer and zero_grad do nothing between syncs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <acc/acc.h>
#include <acc/warnings.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "env_fixture.h"

namespace {
using acc::testing::fake_env;

acc::AcceleratorOptions accumulating(int64_t steps) {
  return acc::AcceleratorOptions().gradient_accumulation_steps(steps).environment(fake_env({}));
}

TEST(Accumulation, MicroBatchesEqualOneBigBatch) {
  const int64_t n = 4, b = 3;
  acc::Accelerator accelerator(accumulating(n));
  torch::manual_seed(0);
  auto model = torch::nn::Linear(5, 2);
  auto reference = torch::nn::Linear(5, 2);
  {
    torch::NoGradGuard no_grad;
    reference->weight.copy_(model->weight);
    reference->bias.copy_(model->bias);
  }
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
  torch::optim::SGD reference_optimizer(reference->parameters(), 0.1);
  accelerator.prepare(model, optimizer);

  for (int outer = 0; outer < 3; ++outer) {
    auto x = torch::randn({n * b, 5});
    auto y = torch::randn({n * b, 2});
    for (int64_t i = 0; i < n; ++i) {
      auto guard = accelerator.accumulate(model);
      EXPECT_EQ(accelerator.sync_gradients(), i == n - 1);
      accelerator.backward(torch::mse_loss(model->forward(x.narrow(0, i * b, b)), y.narrow(0, i * b, b)));
      optimizer.step();
      optimizer.zero_grad();
      if (i < n - 1) {
        EXPECT_TRUE(model->weight.grad().defined()) << "zero_grad must wait for the sync step";
      }
    }
    reference_optimizer.zero_grad();
    torch::mse_loss(reference->forward(x), y).backward();
    reference_optimizer.step();
    EXPECT_LE((model->weight - reference->weight).abs().max().item<double>(), 1e-6);
    EXPECT_LE((model->bias - reference->bias).abs().max().item<double>(), 1e-6);
  }
}

TEST(Accumulation, SchedulerStepsOnlyOnSyncSteps) {
  acc::Accelerator accelerator(accumulating(2));
  auto model = torch::nn::Linear(1, 1);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 1.0);
  acc::Scheduler<torch::optim::StepLR> scheduler(optimizer, 1, 0.5);
  accelerator.prepare(model, optimizer, scheduler);
  torch::optim::SGD reference_optimizer({torch::ones({1}, torch::requires_grad())}, 1.0);
  torch::optim::StepLR reference(reference_optimizer, 1, 0.5);
  for (int i = 0; i < 6; ++i) {
    auto guard = accelerator.accumulate(model);
    accelerator.backward(model->forward(torch::ones({1, 1})).sum());
    optimizer.step();
    scheduler.step();
    if (accelerator.sync_gradients()) reference.step();
  }
  EXPECT_DOUBLE_EQ(optimizer.param_groups()[0].options().get_lr(),
                   reference_optimizer.param_groups()[0].options().get_lr());
}

TEST(Accumulation, PlainOptimizerIsRejectedWithTheFix) {
  acc::Accelerator accelerator(accumulating(4));
  auto model = torch::nn::Linear(2, 1);
  torch::optim::Adam optimizer(model->parameters());
  try {
    accelerator.prepare(model, optimizer);
    FAIL() << "expected ConfigError";
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gradient accumulation"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("acc::Optimizer<torch::optim::Adam>"), std::string::npos);
  }
}

TEST(Accumulation, SeveralModelsAndReduceLROnPlateau) {
  acc::Accelerator accelerator(accumulating(2));
  auto generator = torch::nn::Linear(2, 2);
  auto discriminator = torch::nn::Linear(2, 1);
  acc::Optimizer<torch::optim::Adam> g_opt(generator->parameters(), 1e-3);
  acc::Optimizer<torch::optim::Adam> d_opt(discriminator->parameters(), 1e-3);
  acc::Scheduler<torch::optim::ReduceLROnPlateauScheduler> plateau(
      d_opt, torch::optim::ReduceLROnPlateauScheduler::SchedulerMode::min, 0.5f, 0);
  accelerator.prepare(generator, discriminator, g_opt, d_opt, plateau);
  auto g_weight = generator->weight.detach().clone();
  for (int i = 0; i < 4; ++i) {
    auto guard = accelerator.accumulate(generator, discriminator);
    accelerator.backward(discriminator->forward(generator->forward(torch::ones({1, 2}))).sum());
    g_opt.step();
    d_opt.step();
    plateau.step(1.0f);  // never improves: halves the rate on each sync step
    if (i == 0) EXPECT_TRUE(torch::equal(generator->weight, g_weight)) << "stepped while accumulating";
    g_opt.zero_grad();
    d_opt.zero_grad();
  }
  EXPECT_FALSE(torch::equal(generator->weight, g_weight));
  EXPECT_LT(d_opt.param_groups()[0].options().get_lr(), 1e-3);
}

TEST(Accumulation, BackwardDividesTheLossBySteps) {
  acc::Accelerator accelerator(accumulating(4));
  auto w = torch::ones({1}, torch::requires_grad());
  accelerator.backward(w.sum() * 8);
  EXPECT_EQ(w.grad().item<float>(), 2.0f);
}
}  // namespace

namespace {
// The warnings backward() sends while `train` runs.
std::vector<std::string> warnings_while(const std::function<void()>& train) {
  std::vector<std::string> seen;
  auto previous = acc::set_warning_handler([&](const std::string& message) { seen.push_back(message); });
  train();
  acc::set_warning_handler(previous);
  return seen;
}
}  // namespace

// Accumulation steps without accumulate() divide the loss and still step every batch (Accelerate
// does the same, silently): named once, with the fix. A program that uses accumulate() hears
// nothing (checked first: each distinct warning is reported once per process).
TEST(Accumulation, StepsWithoutAccumulateAreNamedOnce) {
  auto batches = [](acc::Accelerator& accelerator, bool inside_accumulate) {
    auto model = torch::nn::Linear(2, 1);
    acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
    accelerator.prepare(model, optimizer);
    for (int i = 0; i < 4; ++i) {
      std::optional<acc::AccumulateGuard> guard;
      if (inside_accumulate) guard.emplace(accelerator.accumulate(model));
      accelerator.backward(model->forward(torch::ones({3, 2})).sum());
      optimizer.step();
      optimizer.zero_grad();
    }
  };
  acc::Accelerator good(accumulating(3));
  EXPECT_TRUE(warnings_while([&] { batches(good, true); }).empty());
  acc::Accelerator forgetful(accumulating(3));
  const auto seen = warnings_while([&] { batches(forgetful, false); });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NE(seen[0].find("gradient_accumulation_steps is 3 but backward() ran outside accelerator.accumulate()"),
            std::string::npos)
      << seen[0];
  EXPECT_NE(seen[0].find("auto guard = accelerator.accumulate(model);"), std::string::npos) << seen[0];
}
