// acc::checkpoint on one process: same gradients as without it, dropout redrawn identically in the
// recomputation, plain calls outside grad mode.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include <acc/activation_checkpointing.h>

namespace {

struct NetImpl : torch::nn::Module {
  NetImpl() {
    a = register_module("a", torch::nn::Linear(6, 16));
    b = register_module("b", torch::nn::Linear(16, 6));
    dropout = register_module("dropout", torch::nn::Dropout(0.5));
  }
  torch::Tensor block(const torch::Tensor& x) { return b->forward(dropout->forward(torch::gelu(a->forward(x)))); }
  torch::nn::Linear a{nullptr}, b{nullptr};
  torch::nn::Dropout dropout{nullptr};
};
TORCH_MODULE(Net);

std::vector<torch::Tensor> gradients(Net& net, const torch::Tensor& input, bool checkpointed) {
  net->zero_grad();
  auto x = input.detach().requires_grad_();
  torch::manual_seed(42);  // the same dropout mask in both runs
  auto y = checkpointed ? acc::checkpoint([&](const torch::Tensor& h) { return net->block(h); }, x) : net->block(x);
  (y * y).sum().backward();
  std::vector<torch::Tensor> out{x.grad().clone()};
  for (const auto& p : net->parameters()) out.push_back(p.grad().clone());
  return out;
}

TEST(ActivationCheckpoint, SameGradientsAsWithoutItDropoutIncluded) {
  torch::manual_seed(0);
  Net net;
  auto x = torch::randn({8, 6});
  const auto plain = gradients(net, x, false);
  const auto recomputed = gradients(net, x, true);
  ASSERT_EQ(plain.size(), recomputed.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_TRUE(torch::allclose(plain[i], recomputed[i], 1e-6, 1e-7)) << "gradient " << i;
  }
  // The recomputation restored the random state it found: what follows draws as without it.
  torch::manual_seed(7);
  auto after_plain = (gradients(net, x, false), torch::rand({3}));
  torch::manual_seed(7);
  auto after_checkpoint = (gradients(net, x, true), torch::rand({3}));
  EXPECT_TRUE(torch::equal(after_plain, after_checkpoint));
}

TEST(ActivationCheckpoint, KeepsNoActivationsOfThePiece) {
  torch::manual_seed(0);
  Net net;
  auto x = torch::randn({8, 6}, torch::requires_grad());
  auto y = acc::checkpoint([&](const torch::Tensor& h) { return net->block(h); }, x);
  // The graph holds acc's node straight above the input: nothing of the piece in between.
  ASSERT_TRUE(y.grad_fn());
  EXPECT_EQ(y.grad_fn()->name(), "acc::CheckpointBackward");
  EXPECT_EQ(y.grad_fn()->num_outputs(), 1u + net->parameters().size());
}

TEST(ActivationCheckpoint, OutsideGradModeItJustCalls) {
  Net net;
  net->eval();
  auto x = torch::randn({2, 6});
  torch::NoGradGuard no_grad;
  auto y = acc::checkpoint([&](const torch::Tensor& h) { return net->block(h); }, x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(torch::equal(y, net->block(x)));
}

}  // namespace
