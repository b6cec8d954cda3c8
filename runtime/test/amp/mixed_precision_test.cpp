// bf16 autocast on CPU: forward of a prepared model runs in bf16, torch's loss functions in fp32
// (autocast's fp32 list, as Accelerate's fp32-converted outputs give), backward and the optimizer
// in the parameters' dtype; autocast(false) opts a block out; end_training switches it off.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/autocast_mode.h>

#include <acc/acc.h>

#include "env_fixture.h"

namespace {
using acc::testing::fake_env;

TEST(MixedPrecision, Bf16AutocastOnCpu) {
  acc::Accelerator accelerator(acc::AcceleratorOptions()
                                   .mixed_precision(acc::MixedPrecision::BF16)
                                   .environment(fake_env({})));
  torch::manual_seed(0);
  auto model = torch::nn::Linear(8, 4);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.5);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
  accelerator.prepare(model, optimizer);
  EXPECT_TRUE(at::autocast::is_autocast_enabled(torch::kCPU));

  auto x = torch::randn({16, 8});
  auto y = torch::randn({16, 4});
  auto out = model->forward(x);
  EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
  auto loss = torch::mse_loss(out, y);
  EXPECT_EQ(loss.scalar_type(), torch::kFloat) << "torch's losses run in fp32 under autocast";
  {
    auto full = accelerator.autocast(false);
    EXPECT_EQ(model->forward(x).scalar_type(), torch::kFloat);
  }
  EXPECT_EQ(model->forward(x).scalar_type(), torch::kBFloat16) << "autocast(false) must restore";

  const double first = loss.item<double>();
  double last = first;
  for (int i = 0; i < 20; ++i) {
    optimizer.zero_grad();
    auto step_loss = torch::mse_loss(model->forward(x), y);
    accelerator.backward(step_loss);
    EXPECT_EQ(model->weight.grad().scalar_type(), torch::kFloat);
    optimizer.step();
    last = step_loss.item<double>();
  }
  EXPECT_LT(last, first);
  EXPECT_EQ(model->weight.scalar_type(), torch::kFloat) << "parameters stay fp32";
  accelerator.end_training();
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
}

TEST(MixedPrecision, Fp16OnCpuTrainsInFp32WithoutScaler) {
  acc::Accelerator accelerator(acc::AcceleratorOptions()
                                   .mixed_precision(acc::MixedPrecision::FP16)
                                   .environment(fake_env({})));
  auto model = torch::nn::Linear(2, 1);
  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
  accelerator.prepare(model, optimizer);
  EXPECT_EQ(model->forward(torch::ones({1, 2})).scalar_type(), torch::kFloat);
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
  accelerator.backward(model->forward(torch::ones({1, 2})).sum() * 1e30);
  optimizer.step();
  EXPECT_FALSE(accelerator.optimizer_step_was_skipped()) << "no scaler on CPU: nothing to skip";
}

TEST(MixedPrecision, AutocastGuardIsHarmlessWithoutMixedPrecision) {
  acc::Accelerator accelerator(acc::AcceleratorOptions().environment(fake_env({})));
  auto guard = accelerator.autocast();
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
}
}  // namespace
