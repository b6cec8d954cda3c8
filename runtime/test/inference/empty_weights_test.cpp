// acc::init_empty_weights: modules built without weight memory or initialisation work.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <acc/big_modeling.h>

#include "big_model.h"

namespace {

int64_t rss_anon_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssAnon:", 0) == 0) return std::stoll(line.substr(8));
  }
  return -1;
}

TEST(EmptyWeights, TenGigabyteModelTakesNoMemoryAndNoTime) {
  constexpr int kLayers = 40, kWidth = 8192;
  const int64_t before = rss_anon_kb();
  const auto start = std::chrono::steady_clock::now();
  torch::nn::Sequential model;
  {
    acc::init_empty_weights empty;
    for (int i = 0; i < kLayers; ++i) model->push_back(torch::nn::Linear(kWidth, kWidth));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t grown_kb = rss_anon_kb() - before;

  int64_t bytes = 0;
  for (const auto& p : model->parameters()) bytes += p.numel() * p.element_size();
  EXPECT_GT(bytes, 10'000'000'000LL);
  EXPECT_LT(seconds, 1.0) << "building the empty model took " << seconds << " s";
  EXPECT_LT(grown_kb, 50 * 1024) << "RssAnon grew by " << grown_kb << " kB";

  const auto params = model->named_parameters();
  ASSERT_EQ(params.size(), 2u * kLayers);
  for (int i = 0; i < kLayers; ++i) {
    const auto& weight = params[std::to_string(i) + ".weight"];
    const auto& bias = params[std::to_string(i) + ".bias"];
    EXPECT_TRUE(weight.is_meta());
    EXPECT_EQ(weight.sizes(), torch::IntArrayRef({kWidth, kWidth}));
    EXPECT_EQ(bias.sizes(), torch::IntArrayRef({kWidth}));
    EXPECT_EQ(weight.scalar_type(), torch::kFloat);
    EXPECT_TRUE(weight.requires_grad());
  }
  EXPECT_TRUE(acc::has_meta_tensors(*model));
}

TEST(EmptyWeights, SameNamesShapesDtypesAsAnEagerBuild) {
  acc::testing::GuardedLM eager;
  acc::testing::GuardedLM empty{nullptr};
  {
    acc::init_empty_weights guard;
    empty = acc::testing::GuardedLM();
  }
  const auto expected = eager->named_parameters();
  const auto got = empty->named_parameters();
  ASSERT_EQ(got.keys(), expected.keys());
  for (const auto& item : expected) {
    const auto& tensor = got[item.key()];
    EXPECT_TRUE(tensor.is_meta()) << item.key();
    EXPECT_EQ(tensor.sizes(), item.value().sizes()) << item.key();
    EXPECT_EQ(tensor.scalar_type(), item.value().scalar_type()) << item.key();
    EXPECT_EQ(tensor.requires_grad(), item.value().requires_grad()) << item.key();
  }
  EXPECT_FALSE(acc::has_meta_tensors(*eager));
}

TEST(EmptyWeights, BuffersAreEmptyToo) {
  torch::nn::BatchNorm1d norm{nullptr};
  {
    acc::init_empty_weights guard;
    norm = torch::nn::BatchNorm1d(8);
  }
  EXPECT_TRUE(norm->running_mean.is_meta());
  EXPECT_TRUE(norm->running_var.is_meta());
  // torch::tensor(0) takes a fast path that allocates on the CPU without the dispatcher: the scalar
  // keeps its value.
  EXPECT_EQ(norm->num_batches_tracked.item<int64_t>(), 0);
}

TEST(EmptyWeights, EndsWithItsScopeAndStaysOnItsThread) {
  torch::Tensor other_thread;
  {
    acc::init_empty_weights guard;
    EXPECT_TRUE(torch::ones({2}).is_meta());
    std::thread([&] { other_thread = torch::ones({2}); }).join();
    {
      acc::init_on_device cpu(torch::kCPU);
      const auto real = torch::ones({2});
      EXPECT_FALSE(real.is_meta());
      EXPECT_EQ(real.sum().item<float>(), 2.0f);
    }
    EXPECT_TRUE(torch::zeros({2}).is_meta());
  }
  EXPECT_FALSE(other_thread.is_meta());
  const auto after = torch::ones({3});
  EXPECT_EQ(after.device().type(), torch::kCPU);
  EXPECT_EQ(after.sum().item<float>(), 3.0f);
}

TEST(EmptyWeights, OtherDevicesAreAnErrorThatNamesTheWay) {
  try {
    acc::init_on_device guard(torch::Device("cuda:0"));
    FAIL() << "expected ConfigError";
  } catch (const acc::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("init_empty_weights"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(torch::ones({1}).is_meta());
}

}  // namespace
