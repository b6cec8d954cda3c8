// The Accelerator on one process (no launch variables): every call works, collectives are
// identities, prepare is in place, and acc::Optimizer/acc::Scheduler behave like their bases.
#include <gtest/gtest.h>
#include <iomanip>
#include <sstream>
#include <torch/torch.h>

#include <acc/acc.h>

#include "env_fixture.h"

namespace {
using acc::testing::fake_env;

acc::AcceleratorOptions single_process() {
  return acc::AcceleratorOptions().environment(fake_env({}));
}

TEST(Accelerator, SingleProcessProperties) {
  acc::Accelerator accelerator(single_process().cpu(true));
  EXPECT_EQ(accelerator.device(), torch::Device(torch::kCPU));
  EXPECT_EQ(accelerator.distributed_type(), acc::DistributedType::NO);
  EXPECT_EQ(accelerator.num_processes(), 1);
  EXPECT_EQ(accelerator.process_index(), 0);
  EXPECT_EQ(accelerator.local_process_index(), 0);
  EXPECT_TRUE(accelerator.is_main_process());
  EXPECT_TRUE(accelerator.is_local_main_process());
  EXPECT_TRUE(accelerator.is_last_process());
  EXPECT_FALSE(accelerator.use_distributed());
  EXPECT_TRUE(accelerator.sync_gradients());
  EXPECT_FALSE(accelerator.optimizer_step_was_skipped());
  EXPECT_EQ(accelerator.mixed_precision(), acc::MixedPrecision::NO);
  accelerator.wait_for_everyone();
}

TEST(Accelerator, NcclOnCpuIsAConfigErrorAndGlooIsFine) {
  try {
    acc::Accelerator accelerator(single_process().cpu(true).backend("nccl"));
    ADD_FAILURE() << "backend(\"nccl\") was accepted on CPU";
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("backend(\"nccl\") needs CUDA, and this process runs on cpu"),
              std::string::npos) << e.what();
  }
  acc::Accelerator accelerator(single_process().cpu(true).backend("gloo"));
  EXPECT_EQ(accelerator.device(), torch::Device(torch::kCPU));
}

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(3, 2))) {}
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

TEST(Accelerator, PrepareAcceptsEveryModelSpellingInPlace) {
  acc::Accelerator accelerator(single_process());
  NetImpl plain;
  auto shared = std::make_shared<NetImpl>();
  Net holder;
  auto* raw = new NetImpl();
  auto weight = shared->fc->weight;
  torch::optim::SGD optimizer(shared->parameters(), 0.1);
  accelerator.prepare(plain, shared, holder, raw, optimizer);
  accelerator.prepare(shared, optimizer);  // twice: no-op
  EXPECT_TRUE(shared->fc->weight.is_same(weight)) << "prepare must keep parameter identity";
  EXPECT_EQ(&accelerator.unwrap_model(holder), &holder);
  std::vector<std::string> names;
  for (const auto& item : accelerator.unwrap_model(shared)->named_parameters()) names.push_back(item.key());
  EXPECT_EQ(names, (std::vector<std::string>{"fc.weight", "fc.bias"}));
  delete raw;
}

// acc::Optimizer<Opt> prepared on one process must give exactly Opt's numbers.
template <typename Opt, typename Options>
void expect_same_as_base(Options options) {
  acc::Accelerator accelerator(single_process());
  torch::manual_seed(0);
  auto a = torch::nn::Linear(4, 3);
  auto b = torch::nn::Linear(4, 3);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < a->parameters().size(); ++i) b->parameters()[i].copy_(a->parameters()[i]);
  }
  acc::Optimizer<Opt> prepared(a->parameters(), options);
  Opt plain(b->parameters(), options);
  accelerator.prepare(a, prepared);
  EXPECT_TRUE(prepared.is_prepared());
  auto x = torch::randn({5, 4});
  for (int step = 0; step < 3; ++step) {
    auto closure_a = [&] {
      prepared.zero_grad();
      auto loss = a->forward(x).pow(2).sum();
      accelerator.backward(loss);
      return loss;
    };
    auto closure_b = [&] {
      plain.zero_grad();
      auto loss = b->forward(x).pow(2).sum();
      loss.backward();
      return loss;
    };
    prepared.step(closure_a);
    plain.step(closure_b);
  }
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(a->parameters()[i], b->parameters()[i])) << typeid(Opt).name();
  }
}

TEST(AccOptimizer, BehavesLikeEveryLibtorchOptimizer) {
  expect_same_as_base<torch::optim::SGD>(torch::optim::SGDOptions(0.1).momentum(0.9));
  expect_same_as_base<torch::optim::Adam>(torch::optim::AdamOptions(1e-2));
  expect_same_as_base<torch::optim::AdamW>(torch::optim::AdamWOptions(1e-2));
  expect_same_as_base<torch::optim::Adagrad>(torch::optim::AdagradOptions(1e-2));
  expect_same_as_base<torch::optim::RMSprop>(torch::optim::RMSpropOptions(1e-2));
  expect_same_as_base<torch::optim::LBFGS>(torch::optim::LBFGSOptions(0.1));
}

// A user's own optimizer, derived from torch::optim::Optimizer.
struct SignSGDOptions : torch::optim::OptimizerCloneableOptions<SignSGDOptions> {
  SignSGDOptions(double lr = 0.01) : lr_(lr) {}  // NOLINT: implicit like libtorch's options
  double lr_;
  double get_lr() const override { return lr_; }
  void set_lr(const double lr) override { lr_ = lr; }
};
struct SignSGD : torch::optim::Optimizer {
  SignSGD(std::vector<torch::Tensor> params, SignSGDOptions options)
      : Optimizer({torch::optim::OptimizerParamGroup(std::move(params))},
                  std::make_unique<SignSGDOptions>(options)) {}
  torch::Tensor step(LossClosure closure = nullptr) override {
    torch::NoGradGuard no_grad;
    for (auto& group : param_groups()) {
      for (auto& p : group.params()) {
        if (p.grad().defined()) p.sub_(p.grad().sign() * group.options().get_lr());
      }
    }
    return closure ? closure() : torch::Tensor();
  }
};

TEST(AccOptimizer, WorksWithUserOptimizers) {
  acc::Accelerator accelerator(single_process());
  auto w = torch::zeros({2}, torch::requires_grad());
  acc::Optimizer<SignSGD> optimizer(std::vector<torch::Tensor>{w}, SignSGDOptions(0.5));
  accelerator.prepare(optimizer);
  (w * torch::tensor({1.0, -1.0})).sum().backward();
  optimizer.step();
  EXPECT_TRUE(torch::equal(w.detach(), torch::tensor({-0.5f, 0.5f})));
  optimizer.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(AccOptimizer, UnpreparedIsThePlainOptimizer) {
  auto w = torch::ones({1}, torch::requires_grad());
  acc::Optimizer<torch::optim::SGD> optimizer({w}, 1.0);
  EXPECT_FALSE(optimizer.is_prepared());
  w.sum().backward();
  optimizer.step();
  EXPECT_EQ(w.item<float>(), 0.0f);
  torch::optim::Optimizer& base = optimizer;
  EXPECT_EQ(base.param_groups().size(), 1u);
}

TEST(AccScheduler, StepsOncePerCallOnOneProcess) {
  acc::Accelerator accelerator(single_process());
  auto w = torch::ones({1}, torch::requires_grad());
  acc::Optimizer<torch::optim::SGD> optimizer({w}, 1.0);
  acc::Scheduler<torch::optim::StepLR> scheduler(optimizer, /*step_size=*/1, /*gamma=*/0.5);
  accelerator.prepare(optimizer, scheduler);
  torch::optim::SGD reference_optimizer({torch::ones({1}, torch::requires_grad())}, 1.0);
  torch::optim::StepLR reference(reference_optimizer, 1, 0.5);
  for (int i = 0; i < 3; ++i) {
    scheduler.step();
    reference.step();
  }
  EXPECT_DOUBLE_EQ(optimizer.param_groups()[0].options().get_lr(),
                   reference_optimizer.param_groups()[0].options().get_lr());
  EXPECT_LT(optimizer.param_groups()[0].options().get_lr(), 1.0);
}

TEST(AccScheduler, PlainSchedulerIsFineOnOneProcess) {
  acc::Accelerator accelerator(single_process());
  auto w = torch::ones({1}, torch::requires_grad());
  torch::optim::SGD optimizer({w}, 1.0);
  torch::optim::StepLR scheduler(optimizer, 1, 0.5);
  EXPECT_NO_THROW(accelerator.prepare(optimizer, scheduler));
}

TEST(Accelerator, CollectivesAreIdentitiesOnOneProcess) {
  acc::Accelerator accelerator(single_process());
  auto t = torch::arange(6).reshape({2, 3});
  EXPECT_TRUE(torch::equal(accelerator.gather(t), t));
  EXPECT_EQ(accelerator.gather(torch::tensor(3)).sizes(), torch::IntArrayRef({1}));
  EXPECT_TRUE(torch::equal(accelerator.reduce(t, "mean"), t));
  EXPECT_TRUE(torch::equal(accelerator.reduce(t, "sum", 2.0), t * 2));
  // Numbers keep their type: a count stays an integer (rounded after scaling), a loss a double.
  static_assert(std::is_same_v<decltype(accelerator.reduce(int64_t{7}, "sum")), int64_t>);
  EXPECT_EQ(accelerator.reduce(int64_t{7}, "sum"), 7);
  EXPECT_EQ(accelerator.reduce(7, "sum", 0.5), 4);
  EXPECT_EQ(accelerator.reduce(0.1, "mean"), 0.1);
  EXPECT_THROW(accelerator.reduce(1.0, "avg"), acc::ConfigError);
  EXPECT_TRUE(torch::equal(accelerator.broadcast(t), t));
  EXPECT_TRUE(torch::equal(accelerator.pad_across_processes(t), t));
  auto nested = std::make_tuple(t, std::vector<torch::Tensor>{t, t}, std::optional<torch::Tensor>());
  auto out = accelerator.gather(nested);
  EXPECT_EQ(std::get<1>(out).size(), 2u);
  EXPECT_FALSE(std::get<2>(out).has_value());
  try {
    accelerator.reduce(t, "avg");
    FAIL();
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("\"mean\""), std::string::npos);
  }
  EXPECT_THROW(accelerator.broadcast(t, 1), acc::ConfigError);
  EXPECT_FALSE(accelerator.check_trigger());
  accelerator.set_trigger();
  EXPECT_TRUE(accelerator.check_trigger());
  { auto guard = accelerator.main_process_first(); }
  { auto guard = accelerator.local_main_process_first(); }
}

// print() writes what `std::cout << ...` would: std::cout's flags and precision apply (acc-migrate
// turns `std::cout << std::fixed;` ... `std::cout << x << std::endl;` into accelerator.print(x)).
TEST(Accelerator, PrintFollowsTheFormatOfStdCout) {
  acc::Accelerator accelerator(single_process());
  std::stringstream captured;
  std::streambuf* original = std::cout.rdbuf(captured.rdbuf());
  const auto flags = std::cout.flags();
  const auto precision = std::cout.precision();
  std::cout << std::fixed << std::setprecision(2);
  accelerator.print("loss ", 1.0 / 3, " step ", 7);
  std::cout.flags(flags);
  std::cout.precision(precision);
  accelerator.print("loss ", 1.0 / 3);
  std::cout.rdbuf(original);
  EXPECT_EQ(captured.str(), "loss 0.33 step 7\nloss 0.333333\n");
}

TEST(Accelerator, ClipGradNormReturnsTotalNorm) {
  acc::Accelerator accelerator(single_process());
  auto w = torch::zeros({2}, torch::requires_grad());
  (w * torch::tensor({3.0f, 4.0f})).sum().backward();
  double norm = accelerator.clip_grad_norm_({w}, 1.0);
  EXPECT_NEAR(norm, 5.0, 1e-6);
  EXPECT_NEAR(w.grad().norm().item<double>(), 1.0, 1e-5);
  accelerator.clip_grad_value_({w}, 0.1);
  EXPECT_LE(w.grad().abs().max().item<float>(), 0.1f + 1e-7);
}

TEST(Accelerator, NoSyncIsHarmlessOnOneProcess) {
  acc::Accelerator accelerator(single_process());
  auto model = torch::nn::Linear(2, 1);
  accelerator.prepare(model);
  {
    auto guard = accelerator.no_sync(model);
    accelerator.backward(model->forward(torch::ones({1, 2})).sum());
  }
  EXPECT_TRUE(model->weight.grad().defined());
}

TEST(ProcessControl, SplitBetweenProcessesFollowsAccelerate) {
  std::vector<int> items{0, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(acc::split_between_processes(items, 3, 0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(acc::split_between_processes(items, 3, 1), (std::vector<int>{3, 4}));
  EXPECT_EQ(acc::split_between_processes(items, 3, 2), (std::vector<int>{5, 6}));
  EXPECT_EQ(acc::split_between_processes(items, 3, 2, true), (std::vector<int>{5, 6, 6}));
  auto t = torch::arange(5);
  EXPECT_TRUE(torch::equal(acc::split_between_processes(t, 2, 1), torch::arange(3, 5)));
  EXPECT_TRUE(torch::equal(acc::split_between_processes(t, 2, 1, true), torch::tensor({3, 4, 4})));
  EXPECT_THROW(acc::split_between_processes(torch::tensor(1), 2, 0), acc::ConfigError);
}

TEST(ProcessControl, SetSeedIsReproducible) {
  acc::set_seed(42);
  auto a = torch::randn({3});
  acc::set_seed(42, /*device_specific=*/true);  // process 0: same seed
  EXPECT_TRUE(torch::equal(a, torch::randn({3})));
}
}  // namespace
