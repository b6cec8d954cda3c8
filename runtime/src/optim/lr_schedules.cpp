#include <acc/errors.h>
#include <acc/lr_schedules.h>

#include <algorithm>
#include <cmath>

namespace acc {

namespace {
void set_rates(torch::optim::Optimizer& optimizer, const std::vector<double>& rates) {
  auto& groups = optimizer.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].options().set_lr(rates[i]);
}

void require(bool condition, const std::string& message) {
  if (!condition) throw ConfigError("acc: " + message);
}

double warmup_fraction(int64_t step, int64_t warmup) {
  return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
}
}  // namespace

LambdaLR::LambdaLR(torch::optim::Optimizer& optimizer, std::function<double(int64_t)> lambda)
    : LRScheduler(optimizer), lambda_(std::move(lambda)), base_lrs_(get_current_lrs()) {
  set_rates(optimizer, rates_at(0));
}

std::vector<double> LambdaLR::rates_at(int64_t step) const {
  std::vector<double> rates;
  const double factor = lambda_(step);
  for (double base : base_lrs_) rates.push_back(base * factor);
  return rates;
}

// LRScheduler::step() applies get_lrs() and then counts the step: the rates for step_count_ + 1.
std::vector<double> LambdaLR::get_lrs() { return rates_at(static_cast<int64_t>(step_count_) + 1); }

LinearScheduleWithWarmup::LinearScheduleWithWarmup(torch::optim::Optimizer& optimizer,
                                                   int64_t num_warmup_steps,
                                                   int64_t num_training_steps)
    : LambdaLR(optimizer, [=](int64_t step) {
        if (step < num_warmup_steps) return warmup_fraction(step, num_warmup_steps);
        return std::max(0.0, static_cast<double>(num_training_steps - step) /
                                 static_cast<double>(std::max<int64_t>(1, num_training_steps - num_warmup_steps)));
      }) {
  require(num_warmup_steps >= 0 && num_training_steps >= num_warmup_steps,
          "LinearScheduleWithWarmup needs 0 <= num_warmup_steps <= num_training_steps");
}

CosineScheduleWithWarmup::CosineScheduleWithWarmup(torch::optim::Optimizer& optimizer,
                                                   int64_t num_warmup_steps,
                                                   int64_t num_training_steps, double num_cycles)
    : LambdaLR(optimizer, [=](int64_t step) {
        if (step < num_warmup_steps) return warmup_fraction(step, num_warmup_steps);
        const double progress =
            static_cast<double>(step - num_warmup_steps) /
            static_cast<double>(std::max<int64_t>(1, num_training_steps - num_warmup_steps));
        return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * num_cycles * 2.0 * progress)));
      }) {
  require(num_warmup_steps >= 0 && num_training_steps >= num_warmup_steps,
          "CosineScheduleWithWarmup needs 0 <= num_warmup_steps <= num_training_steps");
}

ConstantScheduleWithWarmup::ConstantScheduleWithWarmup(torch::optim::Optimizer& optimizer,
                                                       int64_t num_warmup_steps)
    : LambdaLR(optimizer, [=](int64_t step) {
        return step < num_warmup_steps ? warmup_fraction(step, num_warmup_steps) : 1.0;
      }) {
  require(num_warmup_steps >= 0, "ConstantScheduleWithWarmup needs num_warmup_steps >= 0");
}

OneCycleLR::OneCycleLR(torch::optim::Optimizer& optimizer, double max_lr, int64_t total_steps,
                       OneCycleOptions options)
    : LRScheduler(optimizer), total_steps_(total_steps), cosine_(options.anneal_strategy() == "cos") {
  require(total_steps > 0, "OneCycleLR needs total_steps > 0");
  require(options.pct_start() >= 0 && options.pct_start() <= 1, "OneCycleLR needs 0 <= pct_start <= 1");
  require(options.anneal_strategy() == "cos" || options.anneal_strategy() == "linear",
          "OneCycleLR anneal_strategy must be \"cos\" or \"linear\", not \"" +
              options.anneal_strategy() + "\"");
  const double initial = max_lr / options.div_factor();
  const double minimum = initial / options.final_div_factor();
  const double up_end = options.pct_start() * static_cast<double>(total_steps) - 1;
  if (options.three_phase()) {
    phases_ = {{up_end, initial, max_lr},
               {2 * options.pct_start() * static_cast<double>(total_steps) - 2, max_lr, initial},
               {static_cast<double>(total_steps) - 1, initial, minimum}};
  } else {
    phases_ = {{up_end, initial, max_lr}, {static_cast<double>(total_steps) - 1, max_lr, minimum}};
  }
  set_rates(optimizer, std::vector<double>(optimizer.param_groups().size(), rate_at(0)));
}

double OneCycleLR::rate_at(int64_t step) const {
  if (step > total_steps_) {
    throw ConfigError("acc: OneCycleLR stepped " + std::to_string(step) +
                      " times, more than total_steps = " + std::to_string(total_steps_));
  }
  double start_step = 0;
  for (size_t i = 0; i < phases_.size(); ++i) {
    const auto& phase = phases_[i];
    if (static_cast<double>(step) <= phase.end_step || i + 1 == phases_.size()) {
      const double pct = (static_cast<double>(step) - start_step) / (phase.end_step - start_step);
      if (cosine_) {
        return phase.end_lr + (phase.start_lr - phase.end_lr) / 2.0 * (std::cos(M_PI * pct) + 1);
      }
      return (phase.end_lr - phase.start_lr) * pct + phase.start_lr;
    }
    start_step = phase.end_step;
  }
  return phases_.back().end_lr;
}

std::vector<double> OneCycleLR::get_lrs() {
  return std::vector<double>(get_current_lrs().size(), rate_at(static_cast<int64_t>(step_count_) + 1));
}

}  // namespace acc
