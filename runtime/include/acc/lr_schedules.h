#pragma once
// The learning-rate schedules people use with Accelerate, which libtorch's C++ API lacks (it ships
// StepLR only), as torch::optim::LRScheduler subclasses with the formulas of their Python
// namesakes: LambdaLR, transformers' get_{linear,cosine,constant}_schedule_with_warmup, and
// OneCycleLR. They work plainly or as acc::Scheduler<...>.
//
// As in Python, constructing a schedule sets the learning rate of step 0 (LambdaLR applies
// lambda(0) at construction); after k calls of step() the rate is base_lr * lambda(k).
#include <torch/optim/schedulers/lr_scheduler.h>

#include <functional>
#include <string>
#include <vector>

namespace acc {

/// lr = base_lr * lambda(step) for every parameter group (torch.optim.lr_scheduler.LambdaLR).
class LambdaLR : public torch::optim::LRScheduler {
 public:
  LambdaLR(torch::optim::Optimizer& optimizer, std::function<double(int64_t)> lambda);

  /// The base learning rates (each group's rate when the schedule was created).
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 protected:
  std::vector<double> get_lrs() override;

 private:
  std::vector<double> rates_at(int64_t step) const;
  std::function<double(int64_t)> lambda_;
  std::vector<double> base_lrs_;
};

/// Linear warmup from 0 over `num_warmup_steps`, then linear decay to 0 at `num_training_steps`.
class LinearScheduleWithWarmup : public LambdaLR {
 public:
  LinearScheduleWithWarmup(torch::optim::Optimizer& optimizer, int64_t num_warmup_steps,
                           int64_t num_training_steps);
};

/// Linear warmup, then cosine decay (`num_cycles` 0.5: from the peak to 0 once).
class CosineScheduleWithWarmup : public LambdaLR {
 public:
  CosineScheduleWithWarmup(torch::optim::Optimizer& optimizer, int64_t num_warmup_steps,
                           int64_t num_training_steps, double num_cycles = 0.5);
};

/// Linear warmup, then constant.
class ConstantScheduleWithWarmup : public LambdaLR {
 public:
  ConstantScheduleWithWarmup(torch::optim::Optimizer& optimizer, int64_t num_warmup_steps);
};

/// torch.optim.lr_scheduler.OneCycleLR's learning rates (momentum is not cycled: the equivalent of
/// cycle_momentum=False). `anneal_strategy` "cos" or "linear".
struct OneCycleOptions {
  TORCH_ARG(double, pct_start) = 0.3;
  TORCH_ARG(std::string, anneal_strategy) = "cos";
  TORCH_ARG(double, div_factor) = 25.0;
  TORCH_ARG(double, final_div_factor) = 1e4;
  TORCH_ARG(bool, three_phase) = false;
};

class OneCycleLR : public torch::optim::LRScheduler {
 public:
  OneCycleLR(torch::optim::Optimizer& optimizer, double max_lr, int64_t total_steps,
             OneCycleOptions options = {});

 protected:
  std::vector<double> get_lrs() override;

 private:
  double rate_at(int64_t step) const;
  struct Phase {
    double end_step, start_lr, end_lr;
  };
  std::vector<Phase> phases_;
  int64_t total_steps_;
  bool cosine_;
};

}  // namespace acc
