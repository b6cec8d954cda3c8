#include <acc/accelerator.h>

#include <ATen/ops/tensor.h>
#include <torch/nn/utils/clip_grad.h>

#include <algorithm>
#include <sstream>

#include "gradient_state.h"
#include "model_sync.h"
#include "process_group.h"
#include "reducer.h"
#include "tracking_set.h"

namespace acc {

struct Accelerator::PreparedModel {
  const torch::nn::Module* module = nullptr;
  std::unique_ptr<detail::Reducer> reducer;  // null on one process
};

namespace {
void reject_unimplemented(const ResolvedOptions& resolved) {
  // Accepted by the option parser so that configs stay valid, but not yet implemented: fail
  // loudly instead of silently training without them.
  if (resolved.mixed_precision != MixedPrecision::NO) {
    throw ConfigError("acc: mixed_precision '" + to_string(resolved.mixed_precision) +
                      "' is not available in this version of acc yet; use mixed_precision 'no' "
                      "(unset ACCELERATE_MIXED_PRECISION or drop --mixed_precision)");
  }
  if (resolved.gradient_accumulation_steps != 1) {
    throw ConfigError("acc: gradient_accumulation_steps " +
                      std::to_string(resolved.gradient_accumulation_steps) +
                      " is not available in this version of acc yet; use 1, or accumulate with "
                      "accelerator.no_sync(model) and step every N batches yourself");
  }
  if (resolved.use_fsdp) {
    throw ConfigError("acc: FSDP (ACCELERATE_USE_FSDP) is not available in this version of acc "
                      "yet; use DDP (unset ACCELERATE_USE_FSDP / drop --use_fsdp)");
  }
}
}  // namespace

Accelerator::Accelerator(AcceleratorOptions options)
    : options_(std::move(options)),
      resolved_(resolve_options(options_)),
      state_(options_),
      gradient_state_(std::make_shared<detail::GradientState>()) {
  reject_unimplemented(resolved_);
  gradient_state_->num_processes = state_.num_processes();
  gradient_state_->split_batches = options_.split_batches();
  gradient_state_->step_scheduler_with_optimizer = options_.step_scheduler_with_optimizer();
  trackers_ = std::make_unique<detail::TrackerSet>(options_.log_with(), is_main_process(),
                                                   logging_dir());
}

Accelerator::~Accelerator() = default;

std::string Accelerator::save_state(const std::string& output_dir) {
  CheckpointContext context{&checkpoints_, &project_, &state_, device(), {}};
  return save_training_state(context, output_dir);
}

std::string Accelerator::load_state(const std::string& input_dir) {
  CheckpointContext context{&checkpoints_, &project_, &state_, device(), {}};
  return load_training_state(context, input_dir);
}

bool Accelerator::sync_gradients() const { return gradient_state_->sync_gradients; }
bool Accelerator::optimizer_step_was_skipped() const { return gradient_state_->step_was_skipped; }

void Accelerator::prepare_model(torch::nn::Module& model) {
  for (const auto& prepared : models_) {
    if (prepared->module == &model) return;
  }
  auto prepared = std::make_unique<PreparedModel>();
  prepared->module = &model;
  // Move first: changing device or dtype replaces grad accumulators, and with them DDP's hooks.
  if (options_.device_placement()) model.to(device());
  if (auto* group = state_.process_group()) {
    detail::check_models_agree(*group, model);
    detail::broadcast_model_state(*group, model);
    prepared->reducer = detail::make_reducer(*group, model, options_.ddp());
  }
  models_.push_back(std::move(prepared));
  checkpoints_.add_model(model);
}

void Accelerator::prepare_optimizer(torch::optim::Optimizer& optimizer,
                                    PreparedOptimizerBase* prepared) {
  const void* identity = &optimizer;
  if (std::find(prepared_objects_.begin(), prepared_objects_.end(), identity) !=
      prepared_objects_.end()) {
    return;
  }
  if (prepared != nullptr) {
    prepared->attach_controller(detail::make_optimizer_controller(gradient_state_));
  }
  prepared_objects_.push_back(identity);
  checkpoints_.add_optimizer(optimizer);
}

void Accelerator::prepare_scheduler(const void* identity, PreparedSchedulerBase* prepared) {
  if (std::find(prepared_objects_.begin(), prepared_objects_.end(), identity) !=
      prepared_objects_.end()) {
    return;
  }
  if (prepared != nullptr) {
    prepared->attach_controller(detail::make_scheduler_controller(gradient_state_));
  } else if (num_processes() > 1 && !options_.split_batches() &&
             options_.step_scheduler_with_optimizer()) {
    throw ConfigError(
        "acc: a plain libtorch scheduler was passed to prepare(), but with " +
        std::to_string(num_processes()) +
        " processes each step covers num_processes batches and the scheduler must step that many "
        "times (Accelerate's semantics). Declare it as acc::Scheduler<YourScheduler> (same "
        "constructor arguments), e.g. acc::Scheduler<torch::optim::StepLR> scheduler(optimizer, "
        "30, 0.1);");
  }
  prepared_objects_.push_back(identity);
}

detail::Reducer* Accelerator::reducer_for(const torch::nn::Module& model) const {
  for (const auto& prepared : models_) {
    if (prepared->module == &model) return prepared->reducer.get();
  }
  return nullptr;
}

void Accelerator::backward(const torch::Tensor& loss, const torch::Tensor& gradient,
                           std::optional<bool> retain_graph, bool create_graph) {
  loss.backward(gradient, retain_graph, create_graph);
}

double Accelerator::clip_grad_norm_(const std::vector<torch::Tensor>& parameters, double max_norm,
                                    double norm_type) {
  return torch::nn::utils::clip_grad_norm_(parameters, max_norm, norm_type);
}

void Accelerator::clip_grad_value_(const std::vector<torch::Tensor>& parameters,
                                   double clip_value) {
  torch::nn::utils::clip_grad_value_(parameters, clip_value);
}

bool Accelerator::check_trigger() {
  auto flag = at::tensor({trigger_ ? 1 : 0}, at::TensorOptions().dtype(at::kInt));
  flag = acc::reduce(flag, "max");
  trigger_ = false;
  return flag.item<int>() > 0;
}

void Accelerator::end_training() {
  trackers_->finish();
  state_.wait_for_everyone();
  models_.clear();  // reducers hold the process group
  PartialState::destroy();
}

NoSyncGuard::NoSyncGuard(detail::Reducer* reducer) : reducer_(reducer) {
  if (reducer_ != nullptr) {
    previous_ = reducer_->require_sync();
    reducer_->set_require_sync(false);
  }
}

NoSyncGuard::~NoSyncGuard() {
  if (reducer_ != nullptr) reducer_->set_require_sync(previous_);
}

NoSyncGuard::NoSyncGuard(NoSyncGuard&& other) noexcept
    : reducer_(other.reducer_), previous_(other.previous_) {
  other.reducer_ = nullptr;
}

}  // namespace acc
