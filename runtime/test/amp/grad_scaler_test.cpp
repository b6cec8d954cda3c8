// The grad scaler's algorithm on CPU tensors (its CUDA use differs only in where the tensors live),
// and the Accelerator's fp16 step logic with the scaler forced on CPU by the testing switch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <acc/acc.h>
#include <acc/grad_scaler.h>
#include <acc/testing.h>

#include "env_fixture.h"

namespace {
using acc::testing::fake_env;

TEST(GradScaler, UnscalesFiniteGradientsAndKeepsTheScale) {
  acc::GradScaler scaler(acc::GradScalerKwargs().init_scale(8.0), torch::kCPU);
  auto w = torch::ones({3}, torch::requires_grad());
  torch::optim::SGD optimizer({w}, 0.1);
  scaler.scale((w * 2).sum()).backward();
  EXPECT_TRUE(torch::allclose(w.grad(), torch::full({3}, 16.0)));
  scaler.unscale_(optimizer);
  scaler.unscale_(optimizer);  // once per step: the second call changes nothing
  EXPECT_TRUE(torch::allclose(w.grad(), torch::full({3}, 2.0)));
  EXPECT_FALSE(scaler.found_inf(optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 8.0);
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, BacksOffOnInfAndGrowsAfterTheInterval) {
  acc::GradScaler scaler(acc::GradScalerKwargs().init_scale(8.0).growth_interval(2), torch::kCPU);
  auto w = torch::ones({2}, torch::requires_grad());
  torch::optim::SGD optimizer({w}, 0.1);
  auto step = [&](double factor) {
    optimizer.zero_grad();
    scaler.scale((w * factor).sum()).backward();
    scaler.unscale_(optimizer);
    bool inf = scaler.found_inf(optimizer);
    scaler.update();
    return inf;
  };
  EXPECT_TRUE(step(std::numeric_limits<double>::infinity()));
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  EXPECT_FALSE(step(1.0));
  EXPECT_EQ(scaler.get_scale(), 4.0);
  EXPECT_FALSE(step(1.0));
  EXPECT_EQ(scaler.get_scale(), 8.0) << "growth_interval clean steps must double the scale";
  EXPECT_TRUE(step(std::nan("")));
  EXPECT_EQ(scaler.get_scale(), 4.0);
}

// For a fused step the scaler only checks: the gradients stay scaled (the kernel divides them by
// the scale it is handed) and the flag is 0 or 1 (the kernels skip only where it is exactly 1), on
// the device, for the kernel and update() to read. After unscale_ (clipping) the kernel gets the
// flag alone; disabled, nothing.
TEST(GradScaler, HandsAFusedStepTheScaleAndAFlagWithoutUnscaling) {
  acc::GradScaler scaler(acc::GradScalerKwargs().init_scale(8.0), torch::kCPU);
  const double inf = std::numeric_limits<double>::infinity();
  auto w = torch::ones({3}, torch::requires_grad());
  auto u = torch::ones({1}, torch::requires_grad());
  auto h = torch::ones({2}, torch::dtype(torch::kDouble).requires_grad(true));  // a second kernel call
  torch::optim::SGD optimizer({w, u, h}, 0.1);
  // Both calls find an overflow: the flag is still 1, not 2.
  scaler.scale((w * 2).sum() + (u * inf).sum() + (h * inf).sum()).backward();
  auto inputs = scaler.fused_step_inputs(optimizer);
  ASSERT_TRUE(inputs.grad_scale.has_value());
  ASSERT_TRUE(inputs.found_inf.has_value());
  EXPECT_EQ(inputs.grad_scale->item<float>(), 8.0f);
  EXPECT_EQ(inputs.found_inf->item<float>(), 1.0f);
  EXPECT_TRUE(torch::equal(w.grad(), torch::full({3}, 16.0))) << "the check must not unscale";
  EXPECT_TRUE(scaler.found_inf(optimizer));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 4.0) << "update() must back off on the fused step's flag";

  optimizer.zero_grad();
  scaler.scale((w * 2).sum() + u.sum() + h.sum()).backward();
  scaler.unscale_(optimizer);
  inputs = scaler.fused_step_inputs(optimizer);
  EXPECT_FALSE(inputs.grad_scale.has_value()) << "unscaled already: the kernel must not divide again";
  ASSERT_TRUE(inputs.found_inf.has_value());
  EXPECT_EQ(inputs.found_inf->item<float>(), 0.0f);

  acc::GradScaler disabled(acc::GradScalerKwargs().enabled(false), torch::kCPU);
  inputs = disabled.fused_step_inputs(optimizer);
  EXPECT_FALSE(inputs.grad_scale.has_value() || inputs.found_inf.has_value());
}

TEST(GradScaler, DisabledIsTheIdentity) {
  acc::GradScaler scaler(acc::GradScalerKwargs().enabled(false), torch::kCPU);
  auto loss = torch::tensor(3.0);
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  EXPECT_EQ(scaler.get_scale(), 1.0);
}

TEST(GradScaler, RejectsNonsenseOptions) {
  EXPECT_THROW(acc::GradScaler(acc::GradScalerKwargs().backoff_factor(1.5), torch::kCPU), acc::ConfigError);
  EXPECT_THROW(acc::GradScaler(acc::GradScalerKwargs().growth_interval(0), torch::kCPU), acc::ConfigError);
}

acc::AcceleratorOptions fp16_with_forced_scaler() {
  return acc::AcceleratorOptions()
      .mixed_precision(acc::MixedPrecision::FP16)
      .grad_scaler(acc::GradScalerKwargs().init_scale(1024.0).growth_interval(2))
      .environment(fake_env({}));
}

// fp16 loss scaling runs on CUDA only; these tests force it onto CPU tensors.
class AcceleratorFp16 : public ::testing::Test {
  acc::testing::ForceOnCpuGuard force_{{/*grad_scaler=*/true, /*fsdp_offload=*/false}};
};

TEST_F(AcceleratorFp16, OverflowSkipsTheStepAndLeavesEverythingUntouched) {
  acc::Accelerator accelerator(fp16_with_forced_scaler());
  torch::manual_seed(0);
  auto model = torch::nn::Linear(3, 1);
  acc::Optimizer<torch::optim::Adam> optimizer(model->parameters(), 0.1);
  acc::Scheduler<torch::optim::StepLR> scheduler(optimizer, 1, 0.5);
  accelerator.prepare(model, optimizer, scheduler);
  auto x = torch::ones({2, 3});

  // A clean step first, so that Adam has state to protect.
  optimizer.zero_grad();
  accelerator.backward(model->forward(x).sum());
  optimizer.step();
  scheduler.step();
  EXPECT_FALSE(accelerator.optimizer_step_was_skipped());
  auto weight = model->weight.detach().clone();
  auto lr = optimizer.param_groups()[0].options().get_lr();
  auto& state = static_cast<torch::optim::AdamParamState&>(
      *optimizer.state().at(model->weight.unsafeGetTensorImpl()));
  auto exp_avg = state.exp_avg().clone();
  const auto adam_step = state.step();

  optimizer.zero_grad();
  accelerator.backward(model->forward(x).sum() * std::numeric_limits<float>::infinity());
  optimizer.step();
  scheduler.step();
  EXPECT_TRUE(accelerator.optimizer_step_was_skipped());
  EXPECT_TRUE(optimizer.step_was_skipped());
  EXPECT_TRUE(torch::equal(model->weight.detach(), weight)) << "a skipped step changed the weights";
  EXPECT_TRUE(torch::equal(state.exp_avg(), exp_avg)) << "a skipped step changed Adam's state";
  EXPECT_EQ(state.step(), adam_step);
  EXPECT_EQ(optimizer.param_groups()[0].options().get_lr(), lr) << "the scheduler stepped";
}

TEST_F(AcceleratorFp16, ScaledTrainingEqualsPlainTrainingAndTheScaleGrows) {
  acc::Accelerator accelerator(fp16_with_forced_scaler());
  torch::manual_seed(0);
  auto model = torch::nn::Linear(4, 2);
  auto reference = torch::nn::Linear(4, 2);
  {
    torch::NoGradGuard no_grad;
    reference->weight.copy_(model->weight);
    reference->bias.copy_(model->bias);
  }
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
  torch::optim::SGD reference_optimizer(reference->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  auto x = torch::randn({8, 4});
  for (int i = 0; i < 4; ++i) {
    optimizer.zero_grad();
    auto loss = model->forward(x).pow(2).mean();
    accelerator.backward(loss);
    EXPECT_NEAR(accelerator.clip_grad_norm_(model->parameters(), 1e9), 0, 1e9);  // unscales first
    optimizer.step();
    reference_optimizer.zero_grad();
    reference->forward(x).pow(2).mean().backward();
    reference_optimizer.step();
  }
  EXPECT_TRUE(torch::allclose(model->weight, reference->weight, 1e-5, 1e-6));
}

TEST_F(AcceleratorFp16, ClipGradNormSeesUnscaledGradients) {
  acc::Accelerator accelerator(fp16_with_forced_scaler());
  auto w = torch::zeros({2}, torch::requires_grad());
  acc::Optimizer<torch::optim::SGD> optimizer({w}, 0.1);
  accelerator.prepare(optimizer);
  accelerator.backward((w * torch::tensor({3.0f, 4.0f})).sum());
  EXPECT_NEAR(accelerator.clip_grad_norm_({w}, 100.0), 5.0, 1e-4);
}

TEST_F(AcceleratorFp16, PlainOptimizerIsRejectedWithTheFix) {
  acc::Accelerator accelerator(fp16_with_forced_scaler());
  auto model = torch::nn::Linear(2, 1);
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  try {
    accelerator.prepare(model, optimizer);
    FAIL() << "expected ConfigError";
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("acc::Optimizer<"), std::string::npos) << e.what();
  }
}
}  // namespace
