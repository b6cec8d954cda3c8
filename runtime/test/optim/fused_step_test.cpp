// acc::Optimizer<Opt>::fused(true) against libtorch's own loop: the same update within 1e-6 over 20
// steps for every option the kernels take, the same state fields (a checkpoint written fused is
// resumed unfused), through a prepared Accelerator with the grad scaler and accumulation, and the
// errors for what has no fused kernel.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include <acc/acc.h>
#include <acc/testing.h>

#include "env_fixture.h"
#include "error_text.h"
#include "optim/device_step.h"
#include "scratch_dir.h"

namespace {
using acc::testing::fake_env;

torch::nn::Sequential make_model() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(12, 16), torch::nn::Tanh(), torch::nn::Linear(16, 3));
}

// Two parameter groups (different learning rates), as the kernels run one launch per group.
template <typename Opt, typename Options>
std::unique_ptr<acc::Optimizer<Opt>> make_optimizer(torch::nn::Sequential& model, const Options& options) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(model[0]->parameters(), std::make_unique<Options>(options));
  auto second = std::make_unique<Options>(options);
  second->lr(options.lr() * 0.5);
  groups.emplace_back(model[2]->parameters(), std::move(second));
  return std::make_unique<acc::Optimizer<Opt>>(std::move(groups), options);
}

void train(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer, int steps, int first_batch = 0) {
  for (int step = first_batch; step < first_batch + steps; ++step) {
    torch::manual_seed(100 + step);
    auto x = torch::randn({8, 12}), y = torch::randn({8, 3});
    optimizer.zero_grad();
    torch::mse_loss(model->forward(x), y).backward();
    optimizer.step();
  }
}

double max_difference(torch::nn::Sequential& a, torch::nn::Sequential& b) {
  double worst = 0;
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    worst = std::max(worst, (a->parameters()[i] - b->parameters()[i]).abs().max().item<double>());
  }
  return worst;
}

template <typename Opt, typename Options>
void expect_fused_matches_loop(const Options& options, const std::string& what) {
  auto fused_model = make_model(), loop_model = make_model();
  auto fused = make_optimizer<Opt>(fused_model, options);
  auto loop = make_optimizer<Opt>(loop_model, options);
  fused->fused(true);
  EXPECT_TRUE(fused->fused());
  EXPECT_FALSE(loop->fused());
  train(fused_model, *fused, 20);
  train(loop_model, *loop, 20);
  const double moved = [&] {
    auto start = make_model();
    return max_difference(start, loop_model);
  }();
  EXPECT_GT(moved, 1e-3) << what << ": the steps must move the weights for the comparison to mean anything";
  EXPECT_LT(max_difference(fused_model, loop_model), 1e-6) << what;
}

TEST(FusedStep, AdamMatchesLibtorchsLoop) {
  using torch::optim::AdamOptions;
  expect_fused_matches_loop<torch::optim::Adam>(AdamOptions(1e-2), "Adam");
  expect_fused_matches_loop<torch::optim::Adam>(AdamOptions(1e-2).weight_decay(0.1), "Adam, weight decay");
  expect_fused_matches_loop<torch::optim::Adam>(AdamOptions(1e-2).amsgrad(true).betas({0.8, 0.99}),
                                                "Adam, amsgrad, betas");
}

TEST(FusedStep, AdamWMatchesLibtorchsLoop) {
  using torch::optim::AdamWOptions;
  expect_fused_matches_loop<torch::optim::AdamW>(AdamWOptions(1e-2), "AdamW");
  expect_fused_matches_loop<torch::optim::AdamW>(AdamWOptions(1e-2).weight_decay(0.1).eps(1e-6),
                                                 "AdamW, weight decay, eps");
  expect_fused_matches_loop<torch::optim::AdamW>(AdamWOptions(1e-2).amsgrad(true), "AdamW, amsgrad");
}

TEST(FusedStep, SgdMatchesLibtorchsLoop) {
  using torch::optim::SGDOptions;
  expect_fused_matches_loop<torch::optim::SGD>(SGDOptions(0.05), "SGD");
  expect_fused_matches_loop<torch::optim::SGD>(SGDOptions(0.05).momentum(0.9), "SGD, momentum");
  expect_fused_matches_loop<torch::optim::SGD>(SGDOptions(0.05).momentum(0.9).nesterov(true), "SGD, nesterov");
  expect_fused_matches_loop<torch::optim::SGD>(SGDOptions(0.05).momentum(0.9).dampening(0.1).weight_decay(1e-3),
                                               "SGD, dampening, weight decay");
}

// The state is libtorch's: 5 fused steps, saved, then 5 unfused steps from the loaded state equal 10
// fused steps (and a parameter added later starts its own state).
TEST(FusedStep, StateIsLibtorchsSoACheckpointResumesUnfused) {
  const auto options = torch::optim::AdamWOptions(1e-2).weight_decay(0.01).amsgrad(true);
  auto straight_model = make_model();
  auto straight = make_optimizer<torch::optim::AdamW>(straight_model, options);
  straight->fused(true);
  train(straight_model, *straight, 10);

  auto resumed_model = make_model();
  auto first = make_optimizer<torch::optim::AdamW>(resumed_model, options);
  first->fused(true);
  train(resumed_model, *first, 5);
  std::stringstream saved;
  torch::save(*first, saved);
  auto second = make_optimizer<torch::optim::AdamW>(resumed_model, options);
  torch::load(*second, saved);
  const auto& state = static_cast<torch::optim::AdamWParamState&>(
      *second->state().at(resumed_model->parameters()[0].unsafeGetTensorImpl()));
  EXPECT_EQ(state.step(), 5);
  EXPECT_TRUE(state.max_exp_avg_sq().defined());
  train(resumed_model, *second, 5, /*first_batch=*/5);
  EXPECT_LT(max_difference(straight_model, resumed_model), 1e-6);
}

// Through a prepared Accelerator: the grad scaler (forced on CPU as on CUDA) unscales before the
// fused kernel and skips an overflowing step, and accumulation holds the step back, as unfused.
TEST(FusedStep, PreparedWithTheGradScalerAndAccumulationMatchesUnfused) {
  acc::testing::ForceOnCpuGuard force({/*grad_scaler=*/true});
  auto run = [](bool fused_on) {
    acc::Accelerator accelerator(acc::AcceleratorOptions()
                                     .mixed_precision(acc::MixedPrecision::FP16)
                                     .gradient_accumulation_steps(2)
                                     .environment(fake_env({})));
    auto model = make_model();
    auto optimizer = make_optimizer<torch::optim::Adam>(model, torch::optim::AdamOptions(1e-2));
    optimizer->fused(fused_on);
    accelerator.prepare(model, *optimizer);
    int skipped = 0;
    for (int step = 0; step < 12; ++step) {
      torch::manual_seed(200 + step);
      auto x = torch::randn({8, 12}), y = torch::randn({8, 3});
      if (step == 5) x[0][0] = std::numeric_limits<float>::infinity();  // an overflow: skipped
      auto accumulate = accelerator.accumulate(model);
      accelerator.backward(torch::mse_loss(model->forward(x), y));
      optimizer->step();
      if (accelerator.sync_gradients()) skipped += optimizer->step_was_skipped();
      optimizer->zero_grad();
    }
    EXPECT_EQ(skipped, 1) << (fused_on ? "fused" : "unfused");
    return model;
  };
  auto fused_model = run(true), loop_model = run(false);
  EXPECT_LT(max_difference(fused_model, loop_model), 1e-6);
}

// The step counts the kernel reads live on the device and move there: one tensor per parameter,
// made once and incremented in place (no copy from the host per step), equal to libtorch's integer.
TEST(FusedStep, StepCountsStayOnTheDeviceAndMoveThere) {
  auto model = make_model();
  auto optimizer = make_optimizer<torch::optim::AdamW>(model, torch::optim::AdamWOptions(1e-2));
  optimizer->fused(true);
  train(model, *optimizer, 1);
  auto* weight = model->parameters()[0].unsafeGetTensorImpl();
  auto* counted = dynamic_cast<acc::detail::DeviceStepped<torch::optim::AdamWParamState>*>(
      optimizer->state().at(weight).get());
  ASSERT_NE(counted, nullptr) << "the fused step keeps no device count";
  const void* storage = counted->device_step(torch::kCPU).data_ptr();
  train(model, *optimizer, 4, /*first_batch=*/1);
  EXPECT_EQ(counted->step(), 5);
  EXPECT_EQ(counted->device_step(torch::kCPU).data_ptr(), storage) << "the count was made again";
  EXPECT_EQ(counted->device_step(torch::kCPU).item<float>(), 5.0f);
}

// Counts that moved without the device (libtorch's loop, a loaded checkpoint) are picked up by the
// next fused step: 5 unfused steps then 5 fused ones equal 10 unfused (Adam's bias correction
// reads the count).
TEST(FusedStep, CountsMadeUnfusedCarryIntoFusedSteps) {
  const auto options = torch::optim::AdamOptions(1e-2).weight_decay(0.01);
  auto straight_model = make_model(), switched_model = make_model();
  auto straight = make_optimizer<torch::optim::Adam>(straight_model, options);
  auto switched = make_optimizer<torch::optim::Adam>(switched_model, options);
  train(straight_model, *straight, 10);
  train(switched_model, *switched, 3);
  switched->fused(true);
  train(switched_model, *switched, 1, /*first_batch=*/3);
  switched->fused(false);
  train(switched_model, *switched, 1, /*first_batch=*/4);
  switched->fused(true);
  train(switched_model, *switched, 5, /*first_batch=*/5);
  const auto& state = static_cast<torch::optim::AdamParamState&>(
      *switched->state().at(switched_model->parameters()[0].unsafeGetTensorImpl()));
  EXPECT_EQ(state.step(), 10);
  EXPECT_LT(max_difference(straight_model, switched_model), 1e-6);
}

// fp16 on a fused step: the kernel unscales and skips an overflowing step on the device. The
// optimizer's state, the step counts a checkpoint sees (torch::save and save_state), the scale and
// step_was_skipped() equal the unfused path's, which decides on the host; a run resumed from
// save_state's checkpoint goes on as the straight one. With clipping (gradients unscaled before the
// kernel) as without.
class FusedFp16 : public ::testing::TestWithParam<bool> {
 protected:
  acc::testing::ForceOnCpuGuard force_{{/*grad_scaler=*/true}};
};

struct Fp16Run {
  torch::nn::Sequential model;
  std::unique_ptr<acc::Optimizer<torch::optim::AdamW>> optimizer;
  std::unique_ptr<acc::Accelerator> accelerator;
  std::vector<bool> skipped;
};

Fp16Run fp16_run(bool fused, bool clip, int steps, const std::string& resume_from = "", int first = 0) {
  Fp16Run run;
  run.accelerator = std::make_unique<acc::Accelerator>(
      acc::AcceleratorOptions()
          .mixed_precision(acc::MixedPrecision::FP16)
          .grad_scaler(acc::GradScalerKwargs().init_scale(1024.0).growth_interval(3))
          .environment(fake_env({})));
  run.model = make_model();
  run.optimizer = make_optimizer<torch::optim::AdamW>(run.model, torch::optim::AdamWOptions(1e-2).amsgrad(true));
  run.optimizer->fused(fused);
  run.accelerator->prepare(run.model, *run.optimizer);
  if (!resume_from.empty()) run.accelerator->load_state(resume_from);
  for (int step = first; step < first + steps; ++step) {
    torch::manual_seed(400 + step);
    auto x = torch::randn({8, 12}), y = torch::randn({8, 3});
    if (step == 2 || step == 3 || step == 7) x[1][2] = std::numeric_limits<float>::infinity();
    run.optimizer->zero_grad();
    run.accelerator->backward(torch::mse_loss(run.model->forward(x), y));
    if (clip) run.accelerator->clip_grad_norm_(run.model->parameters(), 0.5);
    run.optimizer->step();
    run.skipped.push_back(run.optimizer->step_was_skipped());
  }
  return run;
}

int64_t saved_step(torch::optim::Optimizer& optimizer, const at::Tensor& param) {
  std::stringstream saved;
  torch::save(optimizer, saved);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  for (auto& group : optimizer.param_groups()) groups.emplace_back(group.params(), group.options().clone());
  torch::optim::AdamW loaded(std::move(groups), torch::optim::AdamWOptions());
  torch::load(loaded, saved);
  return static_cast<torch::optim::AdamWParamState&>(*loaded.state().at(param.unsafeGetTensorImpl())).step();
}

TEST_P(FusedFp16, SkipsOnTheDeviceAsTheUnfusedStepDoesOnTheHost) {
  const bool clip = GetParam();
  auto fused = fp16_run(true, clip, 9), loop = fp16_run(false, clip, 9);
  const std::vector<bool> expected = {false, false, true, true, false, false, false, true, false};
  EXPECT_EQ(fused.skipped, expected);
  EXPECT_EQ(loop.skipped, expected);
  EXPECT_LT(max_difference(fused.model, loop.model), 1e-6);
  const auto weight = fused.model->parameters()[0];
  EXPECT_EQ(saved_step(*fused.optimizer, weight), 6) << "torch::save must see the 6 steps that ran";

  acc::testing::ScratchDir dir;
  fused.accelerator->save_state(dir / "ckpt");
  auto resumed = fp16_run(true, clip, 3, dir / "ckpt", /*first=*/9);
  auto straight = fp16_run(true, clip, 12);
  EXPECT_LT(max_difference(resumed.model, straight.model), 1e-6);
  EXPECT_EQ(saved_step(*resumed.optimizer, resumed.model->parameters()[0]), 9);
  resumed.optimizer->fused(false);  // writes the counts back for libtorch's loop
  const auto& state = static_cast<torch::optim::AdamWParamState&>(
      *resumed.optimizer->state().at(resumed.model->parameters()[0].unsafeGetTensorImpl()));
  EXPECT_EQ(state.step(), 9);
}

INSTANTIATE_TEST_SUITE_P(WithAndWithoutClipping, FusedFp16, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "clipped" : "unclipped"; });

// A closure (which libtorch's step evaluates with gradients on) works fused too, and step() returns
// its loss.
TEST(FusedStep, StepWithAClosureReturnsItsLossAndMatchesUnfused) {
  auto run = [](bool fused_on, std::vector<double>& losses) {
    auto model = make_model();
    acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    optimizer.fused(fused_on);
    torch::manual_seed(300);
    auto x = torch::randn({8, 12}), y = torch::randn({8, 3});
    for (int step = 0; step < 5; ++step) {
      torch::NoGradGuard outside;  // the closure must still build a graph
      auto loss = optimizer.step([&] {
        optimizer.zero_grad();
        auto l = torch::mse_loss(model->forward(x), y);
        l.backward();
        return l;
      });
      losses.push_back(loss.item<double>());
    }
    return model;
  };
  std::vector<double> fused_losses, loop_losses;
  auto fused_model = run(true, fused_losses), loop_model = run(false, loop_losses);
  ASSERT_EQ(fused_losses.size(), 5u);
  EXPECT_LT(fused_losses.back(), fused_losses.front());
  for (size_t i = 0; i < loop_losses.size(); ++i) EXPECT_NEAR(fused_losses[i], loop_losses[i], 1e-6);
  EXPECT_LT(max_difference(fused_model, loop_model), 1e-6);
}

TEST(FusedStep, OptimizersWithoutAFusedKernelAreRefused) {
  auto model = make_model();
  acc::Optimizer<torch::optim::RMSprop> rmsprop(model->parameters(), torch::optim::RMSpropOptions(1e-2));
  const auto message = acc::testing::error_text<acc::ConfigError>([&] { rmsprop.fused(true); });
  EXPECT_NE(message.find("Adam, AdamW and SGD"), std::string::npos) << message;
  EXPECT_FALSE(rmsprop.fused());
  rmsprop.fused(false);  // turning it off is always fine

  auto weight = torch::randn({4}, torch::kComplexFloat).requires_grad_(true);
  acc::Optimizer<torch::optim::SGD> sgd(std::vector<torch::Tensor>{weight}, 0.1);
  sgd.fused(true);
  weight.abs().sum().backward();
  const auto complex_message = acc::testing::error_text<acc::ConfigError>([&] { sgd.step(); });
  EXPECT_NE(complex_message.find("dense real floating-point"), std::string::npos) << complex_message;
  EXPECT_NE(complex_message.find("fused(false)"), std::string::npos) << complex_message;
}

}  // namespace
