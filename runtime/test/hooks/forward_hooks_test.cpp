// The forward seam on one process: guard lines, Sequential children, backward pre-hooks.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <acc/accelerator.h>
#include <acc/hooks.h>
#include <acc/state.h>

namespace {

struct Log {
  std::vector<std::string> events;
};

struct GuardedImpl : torch::nn::Module {
  explicit GuardedImpl(Log* log) : log(log) { linear = register_module("linear", torch::nn::Linear(3, 3)); }
  torch::Tensor forward(torch::Tensor x) {
    acc::ForwardHooksGuard forward_hooks(*this);
    log->events.push_back("body");
    if (fail) throw std::runtime_error("forward failed");
    return torch::tanh(linear->forward(x));
  }
  Log* log;
  bool fail = false;
  torch::nn::Linear linear{nullptr};
};
TORCH_MODULE(Guarded);

acc::ModuleHook record(Log& log, const std::string& what) {
  return [&log, what](torch::nn::Module&) { log.events.push_back(what); };
}

TEST(ForwardHooks, GuardRunsPreAndPostHooksInOrderUntilRemoved) {
  Log log;
  Guarded module(&log);
  auto first = acc::register_forward_pre_hook(*module, record(log, "pre1"));
  acc::register_forward_pre_hook(*module, record(log, "pre2"));
  acc::register_forward_hook(*module, record(log, "post"));
  module->forward(torch::randn({2, 3}));
  EXPECT_EQ(log.events, (std::vector<std::string>{"pre1", "pre2", "body", "post"}));
  first.remove();
  first.remove();  // twice is harmless
  log.events.clear();
  module->forward(torch::randn({2, 3}));
  EXPECT_EQ(log.events, (std::vector<std::string>{"pre2", "body", "post"}));
}

TEST(ForwardHooks, PostHooksRunWhenForwardThrowsAndTheForwardsErrorIsKept) {
  Log log;
  Guarded module(&log);
  acc::register_forward_hook(*module, [&](torch::nn::Module&) {
    log.events.push_back("post");
    throw std::runtime_error("hook failed");
  });
  module->fail = true;
  try {
    module->forward(torch::randn({2, 3}));
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "forward failed");
  }
  EXPECT_EQ(log.events, (std::vector<std::string>{"body", "post"}));
  // Without a pending exception, the hook's own error reaches the caller.
  module->fail = false;
  EXPECT_THROW(module->forward(torch::randn({2, 3})), std::runtime_error);
}

TEST(ForwardHooks, SequentialChildrenWithHooksRunThemAndKeepTheirNames) {
  Log log;
  torch::nn::Sequential seq(torch::nn::Linear(3, 4), torch::nn::ReLU(), torch::nn::Linear(4, 2));
  const auto names_before = seq->named_parameters().keys();
  auto& first = *seq->children()[0];
  acc::register_forward_pre_hook(first, record(log, "pre"));
  acc::register_forward_hook(first, record(log, "post"));
  EXPECT_EQ(acc::hook_sequential(*seq), 1);  // only the child with hooks
  EXPECT_EQ(acc::hook_sequential(*seq), 1);  // idempotent
  auto x = torch::randn({5, 3});
  auto expected = seq->children()[2]->as<torch::nn::Linear>()->forward(
      torch::relu(seq->children()[0]->as<torch::nn::Linear>()->forward(x)));
  log.events.clear();
  auto y = seq->forward(x);
  EXPECT_EQ(log.events, (std::vector<std::string>{"pre", "post"}));
  EXPECT_TRUE(torch::equal(y, expected));
  EXPECT_EQ(seq->named_parameters().keys(), names_before);
}

TEST(ForwardHooks, NestedGuardOfTheSameModuleRunsHooksOnce) {
  Log log;
  torch::nn::Sequential seq{Guarded(&log)};
  auto& child = *seq->children()[0];
  acc::register_forward_pre_hook(child, record(log, "pre"));
  acc::hook_sequential(*seq);
  seq->forward(torch::randn({2, 3}));  // the Sequential's guard, then the child's own line
  EXPECT_EQ(log.events, (std::vector<std::string>{"pre", "body"}));
}

TEST(ForwardHooks, BackwardPreHookRunsOncePerCallBeforeItsNodes) {
  acc::Accelerator accelerator;
  Log log;
  Guarded module(&log);
  acc::register_backward_pre_hook(*module, [&](torch::nn::Module& m) {
    // Its nodes have not run yet: no gradient has reached the parameters.
    log.events.push_back(m.parameters()[0].grad().defined() ? "late" : "backward-pre");
  });
  auto x = torch::randn({2, 3});
  auto loss = (module->forward(x) + module->forward(x)).sum();  // two calls
  log.events.clear();
  accelerator.backward(loss);
  EXPECT_EQ(log.events, (std::vector<std::string>{"backward-pre", "backward-pre"}));
  // Eval builds no nodes: nothing runs in a later backward of another graph.
  {
    torch::NoGradGuard no_grad;
    module->forward(x);
  }
  log.events.clear();
  accelerator.backward((x.requires_grad_() * 2).sum());
  EXPECT_TRUE(log.events.empty());
  acc::PartialState::destroy();
}

// A module whose guard is given its inputs and closes on its output, for hooks that move them.
struct TwoInputsImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x, torch::Tensor y) {
    acc::ForwardHooksGuard forward_hooks(*this, x, y);
    auto sum = x + y;
    return forward_hooks.close(sum);
  }
};
TORCH_MODULE(TwoInputs);

TEST(ForwardHooks, HooksWithArgumentsReplaceInputsAndOutput) {
  TwoInputs module;
  acc::register_forward_pre_hook(*module, [](torch::nn::Module&, acc::ForwardArgs& args) {
    ASSERT_EQ(args.inputs.size(), 2u);
    *args.inputs[1] = *args.inputs[1] * 10;  // the body sees the replaced tensor
  });
  acc::register_forward_hook(*module, [](torch::nn::Module&, acc::ForwardArgs& args) {
    ASSERT_NE(args.output, nullptr);
    *args.output = *args.output + 100;
  });
  const auto out = module->forward(torch::ones({1}), torch::ones({1}));
  EXPECT_EQ(out.item<float>(), 111.0f);
}

TEST(ForwardHooks, SequentialChildrenShowTheirInputAndOutput) {
  torch::nn::Sequential seq(torch::nn::Linear(2, 2), torch::nn::Tanh());
  std::vector<std::string> seen;
  acc::register_forward_pre_hook(*seq[1], [&](torch::nn::Module&, acc::ForwardArgs& args) {
    seen.push_back("in " + std::to_string(args.inputs.size()) + (args.output ? " output" : ""));
  });
  acc::register_forward_hook(*seq[1], [&](torch::nn::Module&, acc::ForwardArgs& args) {
    seen.push_back(args.output != nullptr ? "out" : "no output");
    *args.output = torch::zeros_like(*args.output);
  });
  acc::hook_sequential(*seq);
  EXPECT_TRUE(torch::equal(seq->forward(torch::randn({3, 2})), torch::zeros({3, 2})));
  EXPECT_EQ(seen, (std::vector<std::string>{"in 1", "out"}));
}

}  // namespace
