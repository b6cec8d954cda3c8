#include <acc/accelerator.h>
#include <acc/testing.h>
#include <acc/warnings.h>

#include <ATen/autocast_mode.h>
#include <ATen/ops/tensor.h>

#include <algorithm>
#include <sstream>

#include "checkpoint/state_dict_layout.h"
#include "checkpoint/training_state.h"
#include "core/parallel_strategies.h"
#include "hooks/hook_registry.h"
#include "optim/gradient_state.h"
#include "parallel/gradient_sync.h"
#include "parallel/meta_tensors.h"
#include "tracking/tracker_set.h"

namespace acc {

struct Accelerator::PreparedModel {
  const torch::nn::Module* module = nullptr;
  detail::GradientSync* sync = nullptr;  // the strategy's (DDP or FSDP reducer); null on one process
};

Accelerator::Accelerator(AcceleratorOptions options)
    : options_(std::move(options)),
      resolved_(resolve_options(options_)),
      state_(options_),
      gradient_state_(std::make_shared<detail::GradientState>()) {
  configure_mixed_precision();
  strategy_ = detail::make_parallel_strategy({resolved_, options_.ddp(), state_.process_group(), device(),
                                              state_.launch().local_world_size, gradient_state_->scaler.get()});
  gradient_state_->num_steps = resolved_.gradient_accumulation_steps;
  gradient_state_->sync_with_dataloader = options_.gradient_accumulation_plugin().sync_with_dataloader();
  gradient_state_->sync_each_batch = options_.gradient_accumulation_plugin().sync_each_batch();
  gradient_state_->num_processes = state_.num_processes();
  gradient_state_->split_batches = options_.split_batches();
  gradient_state_->step_scheduler_with_optimizer = options_.step_scheduler_with_optimizer();
  gradient_state_->scheduler_steps_per_process = options_.scheduler_steps_per_process();
  trackers_ = std::make_unique<detail::TrackerSet>(options_.log_with(), is_main_process(),
                                                   logging_dir());
}

Accelerator::~Accelerator() = default;

void Accelerator::configure_mixed_precision() {
  const auto precision = resolved_.mixed_precision;
  if (precision == MixedPrecision::NO) return;
  const bool cuda = device().is_cuda();
  // The grad scaler runs for fp16 on CUDA only, unless a test forces it (acc/testing.h).
  const bool scaler_forced = testing::forced_on_cpu().grad_scaler;
  if (precision == MixedPrecision::BF16) {
    use_autocast_ = true;
    autocast_dtype_ = c10::kBFloat16;
  } else if (cuda) {
    use_autocast_ = true;
    autocast_dtype_ = c10::kHalf;
  } else if (!scaler_forced) {
    // Accelerate's behaviour: fp16 needs a GPU; on CPU it trains in fp32.
    detail::warn("acc: warning: mixed_precision fp16 needs CUDA; training on CPU in fp32 (use bf16 "
                 "for mixed precision on CPU)");
  }
  if (precision == MixedPrecision::FP16 && (cuda || scaler_forced) && options_.grad_scaler().enabled()) {
    gradient_state_->scaler = std::make_shared<GradScaler>(options_.grad_scaler(), device());
  }
}

DistributedType Accelerator::distributed_type() const {
  return strategy_->distributed_type(state_.distributed_type());
}

AutocastGuard Accelerator::autocast(bool enabled) const {
  const auto device_type = device().type();
  if (!use_autocast_) {
    // Nothing to turn on; `autocast(false)` still switches off any autocast the caller set.
    return AutocastGuard(device_type, at::autocast::get_autocast_dtype(device_type),
                         enabled && at::autocast::is_autocast_enabled(device_type));
  }
  return AutocastGuard(device_type, autocast_dtype_, enabled);
}

bool Accelerator::begin_accumulation_step() {
  auto& gs = *gradient_state_;
  gs.accumulate_entered = true;
  if (gs.sync_with_dataloader && gs.end_of_dataloader()) {
    gs.step = 0;
    gs.sync_gradients = true;
  } else {
    gs.step += 1;
    gs.sync_gradients = gs.step % gs.num_steps == 0;
  }
  return gs.sync_gradients || (use_distributed() && gs.sync_each_batch);
}

void Accelerator::unscale_gradients() {
  if (!gradient_state_->scaler) return;
  for (auto* optimizer : optimizers_) gradient_state_->scaler->unscale_(*optimizer);
}

// Accelerate's `step` (where the accumulation cycle stands) is saved per rank, so that a resumed
// run synchronises on the same batches as an uninterrupted one.
std::string Accelerator::save_state(const std::string& output_dir) {
  detail::CheckpointContext context{&checkpoints_, &project_, &state_, &state_dict_layout(), device(),
                                    {{"step", gradient_state_->step}}};
  return detail::save_training_state(context, output_dir);
}

std::string Accelerator::load_state(const std::string& input_dir) {
  detail::CheckpointContext context{&checkpoints_, &project_, &state_, &state_dict_layout(), device(),
                                    {{"step", gradient_state_->step}}};
  auto directory = detail::load_training_state(context, input_dir);
  gradient_state_->step = context.counters[0].second;
  return directory;
}

void Accelerator::save_model_weights(const torch::nn::Module& model, const std::string& directory,
                                     const std::string& max_shard_size, bool safe_serialization) {
  state_dict_layout().save_weights(model, directory, max_shard_size, safe_serialization, is_main_process());
  wait_for_everyone();
}

detail::StateDictLayout& Accelerator::state_dict_layout() {
  if (!state_dict_layout_) state_dict_layout_ = strategy_->make_state_dict_layout();
  return *state_dict_layout_;
}

bool Accelerator::sync_gradients() const { return gradient_state_->sync_gradients; }
bool Accelerator::cpu_ram_efficient_loading() const { return strategy_->cpu_ram_efficient_loading(); }
bool Accelerator::optimizer_step_was_skipped() const { return gradient_state_->step_was_skipped.get(); }

void Accelerator::prepare_model(torch::nn::Module& model) {
  for (const auto& prepared : models_) {
    if (prepared->module == &model) return;
  }
  auto prepared = std::make_unique<PreparedModel>();
  prepared->module = &model;
  // A model built empty (acc::init_empty_weights) on this rank gets rank 0's weights below.
  const std::string first_meta = detail::first_meta_tensor(model);
  // Move first: changing device or dtype replaces grad accumulators, and with them DDP's hooks.
  if (options_.device_placement()) {
    if (first_meta.empty()) {
      model.to(device());
    } else {
      detail::move_tensors_with_data(model, device());
    }
  }
  if (use_autocast_ && !autocast_session_) {
    // Forward cannot be hooked in C++: autocast is switched on for this thread from the first
    // prepared model on (docs/runtime.md, "Mixed precision").
    autocast_session_ = std::make_unique<AutocastGuard>(device().type(), autocast_dtype_, true);
    gradient_state_->autocast_active = true;
  }
  prepared->sync = strategy_->prepare_model(model, {first_meta, device()});
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
  auto controller = strategy_->prepare_optimizer(
      optimizer, prepared != nullptr ? detail::make_optimizer_controller(gradient_state_) : nullptr);
  if (prepared != nullptr) {
    prepared->attach_controller(std::move(controller));
  } else if (gradient_state_->num_steps > 1 || gradient_state_->scaler) {
    throw ConfigError(std::string("acc: a plain libtorch optimizer was passed to prepare(), but ") +
                      (gradient_state_->num_steps > 1 ? "gradient accumulation" : "fp16 loss scaling") +
                      " needs acc's logic at step(). Declare it as acc::Optimizer<YourOptimizer> (same "
                      "constructor arguments), e.g. acc::Optimizer<torch::optim::Adam> "
                      "optimizer(model->parameters(), 1e-3);");
  }
  optimizers_.push_back(&optimizer);
  prepared_objects_.push_back(identity);
  checkpoints_.add_optimizer(optimizer);
}

void Accelerator::prepare_scheduler(const void* identity, PreparedSchedulerBase* prepared) {
  if (std::find(prepared_objects_.begin(), prepared_objects_.end(), identity) !=
      prepared_objects_.end()) {
    return;
  }
  const auto& gs = *gradient_state_;
  const bool multi_steps = gs.step_scheduler_with_optimizer && gs.scheduler_steps_per_process &&
                           !gs.split_batches && num_processes() > 1;
  if (prepared != nullptr) {
    prepared->attach_controller(detail::make_scheduler_controller(gradient_state_));
    // Accelerate's most reported surprise: say it once, with the way out.
    if (multi_steps) {
      detail::warn("acc: note: a prepared scheduler steps " + std::to_string(num_processes()) +
                   " times per optimizer step (once per process, as Accelerate does, so that a "
                   "schedule sized for the single-process data loader ends on time). For one step "
                   "per optimizer step pass AcceleratorOptions().scheduler_steps_per_process(false).");
    }
  } else if (multi_steps || (gs.step_scheduler_with_optimizer && (gs.num_steps > 1 || gs.scaler))) {
    const std::string reason =
        multi_steps ? "with " + std::to_string(num_processes()) +
                          " processes one optimizer step covers num_processes batches and the "
                          "scheduler must step that many times (Accelerate's semantics)"
                    : std::string("it must not step while gradients accumulate or after a skipped "
                                  "fp16 step");
    throw ConfigError("acc: a plain libtorch scheduler was passed to prepare(), but " + reason +
                      ". Declare it as acc::Scheduler<YourScheduler> (same constructor arguments), "
                      "e.g. acc::Scheduler<torch::optim::StepLR> scheduler(optimizer, 30, 0.1);");
  }
  prepared_objects_.push_back(identity);
}

detail::GradientSync* Accelerator::reducer_for(const torch::nn::Module& model) const {
  for (const auto& prepared : models_) {
    if (prepared->module == &model) return prepared->sync;
  }
  return nullptr;
}

// Mistakes that train without an error but not as meant, named at the first backward (acc::warn
// reports each once, on the local main process).
void Accelerator::warn_about_unprepared_training() const {
  if (use_distributed() && models_.empty()) {
    detail::warn("acc: warning: backward() runs on " + std::to_string(num_processes()) +
                 " processes but no model was prepared, so gradients are not synchronised and each process "
                 "trains its own copy; pass the model to accelerator.prepare(model, optimizer) before training");
  }
  if (gradient_state_->num_steps > 1 && !gradient_state_->accumulate_entered) {
    const std::string n = std::to_string(gradient_state_->num_steps);
    detail::warn("acc: warning: gradient_accumulation_steps is " + n +
                 " but backward() ran outside accelerator.accumulate(): the loss is divided by " + n +
                 " and the optimizer still steps every batch; wrap each batch's forward, backward and step in "
                 "`auto guard = accelerator.accumulate(model);`");
  }
}

void Accelerator::backward(const torch::Tensor& loss, const torch::Tensor& gradient,
                           std::optional<bool> retain_graph, bool create_graph) {
  warn_about_unprepared_training();
  auto scaled = loss;
  if (gradient_state_->num_steps > 1) scaled = scaled / gradient_state_->num_steps;
  if (gradient_state_->scaler) scaled = gradient_state_->scaler->scale(scaled);
  {
    // Backward runs in the dtypes forward chose; autocast must not re-cast inside it.
    std::optional<AutocastGuard> no_autocast;
    if (use_autocast_) no_autocast.emplace(device().type(), autocast_dtype_, false);
    // The forward seam's backward half (FULL_SHARD regathers units before their nodes run).
    detail::attach_backward_pre_hooks(scaled);
    scaled.backward(gradient, retain_graph, create_graph);
  }
  // The cast cache holds low-precision copies of the weights the optimizer is about to change.
  if (use_autocast_) at::autocast::clear_cache();
}

FullParametersGuard Accelerator::summon_full_params(const torch::nn::Module& model, bool writeback) {
  return strategy_->full_parameters(model, writeback);
}

double Accelerator::clip_grad_norm_(const std::vector<torch::Tensor>& parameters, double max_norm,
                                    double norm_type) {
  unscale_gradients();
  return strategy_->clip_grad_norm_(parameters, max_norm, norm_type);
}

void Accelerator::clip_grad_value_(const std::vector<torch::Tensor>& parameters,
                                   double clip_value) {
  unscale_gradients();
  strategy_->clip_grad_value_(parameters, clip_value);
}

bool Accelerator::check_trigger() {
  auto flag = at::tensor({trigger_ ? 1 : 0}, at::TensorOptions().dtype(at::kInt));
  flag = acc::reduce(flag, ReduceOp::MAX);
  trigger_ = false;
  return flag.item<int>() > 0;
}

void Accelerator::end_training() {
  trackers_->finish();
  strategy_->end_training();
  state_.wait_for_everyone();
  models_.clear();
  state_dict_layout_.reset();  // FSDP's points into the strategy
  strategy_->release();        // its reducers hold the process group
  autocast_session_.reset();
  gradient_state_->autocast_active = false;
  PartialState::destroy();
}

NoSyncGuard::NoSyncGuard(detail::GradientSync* reducer) : reducer_(reducer) {
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
