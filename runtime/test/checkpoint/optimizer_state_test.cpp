// Optimizer state through save_state / load_state, for every libtorch optimizer: state tensors in
// optimizer.safetensors, the rest (param groups, options, step counts) in optimizer.libtorch.bin.
// A fresh model and optimizer that load the checkpoint then take the same steps, bit for bit, as
// the objects that saved it.
#include <acc/acc.h>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <memory>

#include "env_fixture.h"
#include "test_util.h"

using acc::testing::ScratchDir;

namespace {

acc::AcceleratorOptions single_process() {
  return acc::AcceleratorOptions().environment(acc::testing::fake_env({})).cpu(true);
}

torch::nn::Sequential make_model() {
  torch::manual_seed(3);
  return torch::nn::Sequential(torch::nn::Linear(6, 16), torch::nn::Tanh(), torch::nn::Linear(16, 2));
}

// Two param groups with different options where the optimizer allows it (LBFGS takes one).
using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(torch::nn::Sequential&)>;

template <typename Opt, typename Options>
MakeOptimizer two_groups(Options first, Options second) {
  return [first, second](torch::nn::Sequential& model) {
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(model[0]->parameters(), std::make_unique<Options>(first));
    groups.emplace_back(model[2]->parameters(), std::make_unique<Options>(second));
    return std::make_unique<Opt>(std::move(groups), first);
  };
}

void steps(torch::nn::Sequential& model, torch::optim::Optimizer& optimizer, int from, int count) {
  for (int i = from; i < from + count; ++i) {
    auto generator = torch::Generator(at::detail::createCPUGenerator(100 + i));
    const auto x = torch::randn({8, 6}, generator);
    const auto y = torch::randn({8, 2}, generator);
    auto closure = [&] {
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      return loss;
    };
    optimizer.step(closure);
  }
}

std::vector<torch::Tensor> weights(torch::nn::Sequential& model) {
  std::vector<torch::Tensor> out;
  for (const auto& p : model->parameters()) out.push_back(p.detach().clone());
  return out;
}

bool bitwise_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i], b[i])) return false;
  }
  return true;
}

struct Case {
  const char* name;
  MakeOptimizer make;
  const char* first_state_tensor;  // a field that must be in optimizer.safetensors
};

void PrintTo(const Case& c, std::ostream* out) { *out << c.name; }

class OptimizerState : public ::testing::TestWithParam<Case> {};

}  // namespace

TEST_P(OptimizerState, FreshObjectsResumeBitForBit) {
  ScratchDir dir;
  std::vector<torch::Tensor> continued, saved_weights;
  {
    acc::Accelerator accelerator(single_process());
    auto model = make_model();
    auto optimizer = GetParam().make(model);
    accelerator.prepare(model, *optimizer);
    steps(model, *optimizer, 0, 3);
    accelerator.save_state(dir / "ckpt");
    saved_weights = weights(model);
    steps(model, *optimizer, 3, 3);
    continued = weights(model);
  }
  const auto file = acc::safetensors::MappedFile(dir / "ckpt/optimizer.safetensors");
  EXPECT_TRUE(file.contains(std::string("state.0.") + GetParam().first_state_tensor));

  acc::Accelerator accelerator(single_process());
  auto model = make_model();
  auto optimizer = GetParam().make(model);
  // Options that differ from the saved ones: loading must bring the saved ones back.
  for (auto& group : optimizer->param_groups()) group.options().set_lr(0.5);
  accelerator.prepare(model, *optimizer);
  accelerator.load_state(dir / "ckpt");
  ASSERT_TRUE(bitwise_equal(weights(model), saved_weights));
  steps(model, *optimizer, 3, 3);
  EXPECT_TRUE(bitwise_equal(weights(model), continued)) << "state or options were not restored";
}

INSTANTIATE_TEST_SUITE_P(
    EveryLibtorchOptimizer, OptimizerState,
    ::testing::Values(
        Case{"SGD", two_groups<torch::optim::SGD>(torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true),
                                                  torch::optim::SGDOptions(0.02).momentum(0.5).weight_decay(0.01)),
             "momentum_buffer"},
        Case{"Adam", two_groups<torch::optim::Adam>(torch::optim::AdamOptions(0.01).amsgrad(true),
                                                    torch::optim::AdamOptions(0.03).weight_decay(0.1)),
             "max_exp_avg_sq"},
        Case{"AdamW", two_groups<torch::optim::AdamW>(torch::optim::AdamWOptions(0.01),
                                                      torch::optim::AdamWOptions(0.02).amsgrad(true)),
             "exp_avg"},
        Case{"Adagrad", two_groups<torch::optim::Adagrad>(torch::optim::AdagradOptions(0.05).lr_decay(0.01),
                                                          torch::optim::AdagradOptions(0.1)),
             "sum"},
        Case{"RMSprop", two_groups<torch::optim::RMSprop>(
                            torch::optim::RMSpropOptions(0.01).centered(true).momentum(0.9),
                            torch::optim::RMSpropOptions(0.005)),
             "grad_avg"},
        Case{"LBFGS",
             [](torch::nn::Sequential& model) -> std::unique_ptr<torch::optim::Optimizer> {
               return std::make_unique<torch::optim::LBFGS>(model->parameters(),
                                                            torch::optim::LBFGSOptions(0.5).max_iter(4).history_size(3));
             },
             "old_dirs.0"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(OptimizerState, ErrorsNameTheMismatch) {
  ScratchDir dir;
  {
    acc::Accelerator accelerator(single_process());
    auto model = make_model();
    torch::optim::Adam optimizer(model->parameters(), 0.01);
    accelerator.prepare(model, optimizer);
    steps(model, optimizer, 0, 1);
    accelerator.save_state(dir / "ckpt");
  }
  acc::Accelerator accelerator(single_process());
  auto model = make_model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  accelerator.prepare(model, optimizer);
  try {
    accelerator.load_state(dir / "ckpt");
    FAIL() << "Adam's state must not load into SGD";
  } catch (const acc::CheckpointError& error) {
    EXPECT_NE(std::string(error.what()).find("saved from another optimizer type or other parameters"),
              std::string::npos)
        << error.what();
  }
}
