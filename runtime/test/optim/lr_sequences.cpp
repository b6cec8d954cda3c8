// Prints the learning rate of each schedule after construction and after every step, one line per
// schedule ("name lr0 lr1 ..."), for test/parity/lr_scheduler_parity.py.
#include <torch/optim/sgd.h>

#include <cstdio>
#include <functional>
#include <memory>

#include <acc/lr_schedules.h>
#include <acc/scheduler.h>

namespace {
void print(const char* name, double lr, int steps,
           const std::function<std::unique_ptr<torch::optim::LRScheduler>(torch::optim::Optimizer&)>& make) {
  torch::optim::SGD optimizer({torch::zeros({1}, torch::requires_grad())}, lr);
  auto scheduler = make(optimizer);
  std::printf("%s", name);
  for (int i = 0; i < steps; ++i) {
    std::printf(" %.17g", optimizer.param_groups()[0].options().get_lr());
    scheduler->step();
  }
  std::printf("\n");
}
}  // namespace

int main() {
  using Opt = torch::optim::Optimizer;
  print("linear_warmup", 0.1, 12, [](Opt& o) { return std::make_unique<acc::LinearScheduleWithWarmup>(o, 3, 10); });
  print("linear_no_warmup", 0.1, 10, [](Opt& o) { return std::make_unique<acc::LinearScheduleWithWarmup>(o, 0, 10); });
  print("cosine_warmup", 0.1, 12, [](Opt& o) { return std::make_unique<acc::CosineScheduleWithWarmup>(o, 3, 10); });
  print("cosine_cycles", 0.1, 12, [](Opt& o) { return std::make_unique<acc::CosineScheduleWithWarmup>(o, 2, 10, 1.5); });
  print("cosine_no_warmup", 0.1, 10, [](Opt& o) { return std::make_unique<acc::CosineScheduleWithWarmup>(o, 0, 10); });
  print("constant_warmup", 0.1, 8, [](Opt& o) { return std::make_unique<acc::ConstantScheduleWithWarmup>(o, 4); });
  print("lambda_exp", 0.2, 6, [](Opt& o) {
    return std::make_unique<acc::LambdaLR>(o, [](int64_t s) { return std::pow(0.9, static_cast<double>(s)); });
  });
  print("onecycle_cos", 0.01, 20, [](Opt& o) { return std::make_unique<acc::OneCycleLR>(o, 0.5, 20); });
  print("onecycle_linear_three_phase", 0.01, 20, [](Opt& o) {
    return std::make_unique<acc::OneCycleLR>(
        o, 0.5, 20, acc::OneCycleOptions().anneal_strategy("linear").three_phase(true).pct_start(0.25));
  });
  // Prepared-style wrapper: acc::Scheduler<S> unprepared behaves exactly like S.
  print("wrapped_cosine_warmup", 0.1, 12,
        [](Opt& o) { return std::make_unique<acc::Scheduler<acc::CosineScheduleWithWarmup>>(o, 3, 10); });
  return 0;
}
