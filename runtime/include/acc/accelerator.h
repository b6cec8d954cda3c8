#pragma once
// acc::Accelerator: a thin facade over process state (state.h), collectives (collectives.h), the
// parallelism strategy that prepares models (one process, DDP or FSDP), optimizers and schedulers,
// with Accelerate's names and semantics.
#include <torch/data/samplers/random.h>
#include <torch/data/samplers/sequential.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>

#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <acc/autocast.h>
#include <acc/checkpointing.h>
#include <acc/detail/checkpoint_registry.h>
#include <acc/collectives.h>
#include <acc/data_loader.h>
#include <acc/optimizer.h>
#include <acc/options.h>
#include <acc/process_control.h>
#include <acc/progress_bar.h>
#include <acc/scheduler.h>
#include <acc/state.h>
#include <acc/tracker.h>

namespace acc {

namespace detail {
class GradientSync;
class ParallelStrategy;
class StateDictLayout;
struct GradientState;
class TrackerSet;

template <typename T>
struct is_shared_ptr : std::false_type {};
template <typename T>
struct is_shared_ptr<std::shared_ptr<T>> : std::true_type {
  using element = T;
};
template <typename>
inline constexpr bool always_false = false;
template <typename T>
struct is_unique_ptr : std::false_type {};
template <typename T>
struct is_unique_ptr<std::unique_ptr<T>> : std::true_type {};
}  // namespace detail

/// RAII guard returned by Accelerator::no_sync: inside it, backward passes of the model
/// accumulate gradients locally without communicating. It must enclose the backward call.
class NoSyncGuard {
 public:
  explicit NoSyncGuard(detail::GradientSync* reducer);
  ~NoSyncGuard();
  NoSyncGuard(NoSyncGuard&& other) noexcept;
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(NoSyncGuard&&) = delete;

 private:
  detail::GradientSync* reducer_;
  bool previous_ = true;
};

/// RAII guard returned by Accelerator::accumulate: decides whether this batch synchronises
/// gradients and steps the optimizer, and keeps the models in no_sync while it does not.
class AccumulateGuard {
 public:
  explicit AccumulateGuard(std::vector<NoSyncGuard> no_sync) : no_sync_(std::move(no_sync)) {}

 private:
  std::vector<NoSyncGuard> no_sync_;
};

class Accelerator {
 public:
  explicit Accelerator(AcceleratorOptions options = {});
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  // --- properties -------------------------------------------------------------------------
  torch::Device device() const { return state_.device(); }
  /// FSDP when FSDP is configured and several processes run; otherwise the state's type.
  DistributedType distributed_type() const;
  int num_processes() const { return state_.num_processes(); }
  int process_index() const { return state_.process_index(); }
  int local_process_index() const { return state_.local_process_index(); }
  bool is_main_process() const { return state_.is_main_process(); }
  bool is_local_main_process() const { return state_.is_local_main_process(); }
  bool is_last_process() const { return state_.is_last_process(); }
  bool use_distributed() const { return state_.use_distributed(); }
  MixedPrecision mixed_precision() const { return resolved_.mixed_precision; }
  int64_t gradient_accumulation_steps() const { return resolved_.gradient_accumulation_steps; }
  bool sync_gradients() const;
  /// FSDP's cpu_ram_efficient_loading (FSDP_CPU_RAM_EFFICIENT_LOADING): only the main process needs
  /// the model's weights; the others may build it inside acc::init_empty_weights (see there).
  bool cpu_ram_efficient_loading() const;
  bool optimizer_step_was_skipped() const;
  const AcceleratorOptions& options() const { return options_; }
  const PartialState& state() const { return state_; }

  // --- prepare ----------------------------------------------------------------------------
  /// Prepares models, optimizers and schedulers in place, in any order and number: models move
  /// to device() and become data-parallel (parameters and buffers broadcast from rank 0, gradients
  /// all-reduced during backward); acc::Optimizer/acc::Scheduler get Accelerate's step logic.
  /// Preparing an object twice is a no-op.
  template <typename... Objects>
  void prepare(Objects&... objects) {
    (prepare_one(objects), ...);
  }

  /// The model itself: acc prepares in place and adds no wrapper (state-dict names unchanged).
  template <typename Model>
  Model& unwrap_model(Model& model) const {
    return model;
  }
  /// Under FSDP FULL_SHARD/HYBRID_SHARD a prepared model's units are released between uses; while
  /// the returned guard lives its parameters are whole on every rank, and at its end changes
  /// are written back to the shards (`writeback`) and the units released again (torch's
  /// FSDP.summon_full_params). Collective. Elsewhere a guard that does nothing.
  FullParametersGuard summon_full_params(const torch::nn::Module& model, bool writeback = true);
  template <typename M>
  FullParametersGuard summon_full_params(const torch::nn::ModuleHolder<M>& model, bool writeback = true) {
    return summon_full_params(*model, writeback);
  }

  // --- training step ----------------------------------------------------------------------
  /// loss.backward() with acc's scaling; arguments as torch::Tensor::backward.
  void backward(const torch::Tensor& loss, const torch::Tensor& gradient = {},
                std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);
  /// Clips the gradient norm of `parameters` (already synchronised); returns the total norm.
  double clip_grad_norm_(const std::vector<torch::Tensor>& parameters, double max_norm,
                         double norm_type = 2.0);
  void clip_grad_value_(const std::vector<torch::Tensor>& parameters, double clip_value);

  /// Gradient accumulation (Accelerate's accumulate): wrap each batch's forward, backward and
  /// optimizer step. Gradients are synchronised and the optimizer steps every
  /// gradient_accumulation_steps batches and at the end of a prepared data loader; in between,
  /// the models do not communicate and acc::Optimizer::step/zero_grad do nothing.
  template <typename... Models>
  [[nodiscard]] AccumulateGuard accumulate(Models&... models) {
    std::vector<NoSyncGuard> no_sync;
    if (!begin_accumulation_step()) {
      (no_sync.emplace_back(reducer_for(module_of(models))), ...);
    }
    return AccumulateGuard(std::move(no_sync));
  }

  /// Autocast for code outside the prepared model's forward (`enabled = false`: run a block in
  /// full precision). With mixed_precision "no" the guard changes nothing when enabled.
  [[nodiscard]] AutocastGuard autocast(bool enabled = true) const;

  /// Inside the returned guard, backward passes through `model` do not synchronise gradients.
  template <typename Model>
  [[nodiscard]] NoSyncGuard no_sync(Model& model) {
    return NoSyncGuard(reducer_for(module_of(model)));
  }

  // --- collectives (see collectives.h) ----------------------------------------------------
  template <typename T>
  T gather(const T& tree) const {
    return acc::gather(tree);
  }
  template <typename T>
  T reduce(const T& tree, const std::string& reduction = "sum", double scale = 1.0) const {
    return acc::reduce(tree, reduction, scale);
  }
  template <typename T>
  T reduce(const T& tree, ReduceOp op, double scale = 1.0) const {
    return acc::reduce(tree, op, scale);
  }
  template <typename T>
  T broadcast(const T& tree, int from_process = 0) const {
    return acc::broadcast(tree, from_process);
  }
  template <typename T>
  T pad_across_processes(const T& tree, int64_t dim = 0, double pad_index = 0,
                         bool pad_first = false) const {
    return acc::pad_across_processes(tree, dim, pad_index, pad_first);
  }
  /// This process's contiguous share of `inputs` (a std::vector or a tensor's dim 0), see
  /// acc::split_between_processes.
  template <typename T>
  T split_between_processes(const T& inputs, bool apply_padding = false) const {
    return acc::split_between_processes(inputs, num_processes(), process_index(), apply_padding);
  }

  // --- data loading and evaluation (see data_loader.h, docs/data.md) ----------------------
  /// torch::data::make_data_loader's overloads, returning this rank's share of the batches
  /// (Accelerate's sharding, split_batches/even_batches from the options), on device(). All
  /// ranks must prepare their loaders in the same order (the shuffle seed is agreed on here).
  template <typename Sampler = torch::data::samplers::RandomSampler, typename Dataset>
  std::enable_if_t<!Dataset::is_stateful && std::is_constructible_v<Sampler, size_t>,
                   std::unique_ptr<DataLoader<Dataset, Sampler>>>
  prepare_data_loader(Dataset dataset,
                      torch::data::DataLoaderOptions options = torch::data::DataLoaderOptions()) {
    const auto size = dataset.size();
    if (!size) {
      throw ConfigError("acc: prepare_data_loader needs a dataset whose size() is known to build "
                        "its sampler; pass a sampler object as the second argument");
    }
    return prepare_data_loader(std::move(dataset), Sampler(*size), options);
  }
  template <typename Dataset, typename Sampler>
  std::unique_ptr<DataLoader<Dataset, Sampler>> prepare_data_loader(
      Dataset dataset, Sampler sampler, torch::data::DataLoaderOptions options) {
    auto loader = detail::make_prepared_loader(std::move(dataset), std::move(sampler), options,
                                               loader_context());
    checkpoints_.add_data_loader(loader->position());  // save_state keeps where it stands
    return loader;
  }
  /// Stateful datasets cannot be sharded by index: a compile-time error says what to do.
  template <typename Dataset, typename = std::enable_if_t<Dataset::is_stateful>>
  void prepare_data_loader(Dataset dataset,
                           torch::data::DataLoaderOptions options = torch::data::DataLoaderOptions()) {
    detail::make_prepared_loader(std::move(dataset), torch::data::samplers::SequentialSampler(0),
                                 options, loader_context());
  }
  /// The next iteration of `loader` starts after its first `num_batches` batches (resuming
  /// inside an epoch); later iterations are complete.
  template <typename Loader>
  Loader& skip_first_batches(Loader& loader, size_t num_batches) const {
    if constexpr (detail::is_unique_ptr<Loader>::value) {
      loader->skip_first_batches(num_batches);
    } else {
      loader.skip_first_batches(num_batches);
    }
    return loader;
  }
  /// gather(), then, on the last batch of a prepared loader, only the first `remainder` rows:
  /// the samples duplicated to even the ranks out are dropped, so metrics count each sample once.
  template <typename T>
  T gather_for_metrics(const T& tree) const {
    T gathered = acc::gather(tree);
    const int64_t keep = samples_to_keep_for_metrics();
    if (keep < 0) return gathered;
    return map_tensors(gathered, [keep](const at::Tensor& t) { return t.slice(0, 0, keep); });
  }

  // --- process control --------------------------------------------------------------------
  void wait_for_everyone() const { state_.wait_for_everyone(); }
  /// Prints on the local main process only (stream-style: arguments are written with <<), in
  /// std::cout's format: its flags and precision (`std::cout << std::fixed;` earlier) apply.
  template <typename... Args>
  void print(const Args&... args) const {
    if (!is_local_main_process()) return;
    std::ostringstream line;
    line.copyfmt(std::cout);
    line.exceptions(std::ios::goodbit);
    (line << ... << args);
    std::cout << line.str() << std::endl;
  }
  /// The main process runs the guarded block first; the others wait, then run it.
  [[nodiscard]] ProcessOrderGuard main_process_first() const {
    return ProcessOrderGuard(state_, is_main_process());
  }
  [[nodiscard]] ProcessOrderGuard local_main_process_first() const {
    return ProcessOrderGuard(state_, is_local_main_process());
  }
  /// Raises a flag that check_trigger() sees on every rank (e.g. early stopping).
  void set_trigger() { trigger_ = true; }
  /// True on every rank if any rank called set_trigger() since the last check; resets it.
  bool check_trigger();
  // --- checkpointing (checkpointing.h, checkpoint_model.h, docs/checkpointing.md) ---------
  /// The main process writes the model's weights (acc::save_model: safetensors, sharded above
  /// max_shard_size, Hub layout); the others wait. Every rank must call it.
  template <typename Model>
  void save_model(const Model& model, const std::string& save_directory,
                  const std::string& max_shard_size = "10GB", bool safe_serialization = true) {
    save_model_weights(module_of(const_cast<Model&>(model)), save_directory, max_shard_size,
                       safe_serialization);
  }
  /// Writes every prepared model, optimizer and scheduler, registered object, data loader
  /// position and each rank's RNG states to `output_dir` (or, with automatic naming,
  /// {project_dir}/checkpoints/checkpoint_{iteration}), crash-safely. Returns the directory.
  std::string save_state(const std::string& output_dir = "");
  /// Restores save_state's checkpoint; "" takes the newest complete automatic checkpoint.
  std::string load_state(const std::string& input_dir = "");
  /// Adds `object` (with save(torch::serialize::OutputArchive&) and load(InputArchive&)) to
  /// save_state / load_state, as custom_checkpoint_{i}.bin in registration order.
  template <typename T>
  void register_for_checkpointing(T& object) {
    static_assert(detail::has_archive_methods<T>::value,
                  "acc: register_for_checkpointing needs save(torch::serialize::OutputArchive&) and "
                  "load(torch::serialize::InputArchive&) members, or pass a pair of functions");
    checkpoints_.add_custom(&object, [&object](torch::serialize::OutputArchive& a) { object.save(a); },
                            [&object](torch::serialize::InputArchive& a) { object.load(a); });
  }
  void register_for_checkpointing(SaveFunction save, LoadFunction load) {
    checkpoints_.add_custom(nullptr, std::move(save), std::move(load));
  }
  const std::string& project_dir() const { return project_.project_dir(); }
  /// The number of the next automatic checkpoint.
  int64_t save_iteration() const { return project_.iteration(); }

  // --- experiment tracking and progress (tracking.h, progress_bar.h, docs/tracking.md) ----
  /// Starts the trackers of log_with under {logging_dir}/{project_name} (main process only) and
  /// stores `config`, the run's hyperparameters, in them. Call it once on every process.
  void init_trackers(const std::string& project_name, const TrackerValues& config = {});
  /// Logs `values` (numbers; strings become text) at `step` to every tracker on the main
  /// process; the other processes do nothing.
  void log(const TrackerValues& values, std::optional<int64_t> step = std::nullopt);
  /// The tracker named `name` ("tensorboard", "jsonl", "csv" or a user tracker's name()); where
  /// it does not run (not the main process), a tracker that ignores every call.
  GeneralTracker& get_tracker(const std::string& name);
  /// ProjectConfiguration's logging_dir, or its project_dir when logging_dir is empty.
  std::string logging_dir() const;
  /// A progress bar drawn only on the local main process (disabled, costing nothing, elsewhere).
  ProgressBar progress_bar(int64_t total, std::string description = {}) const;
  ProgressBar progress_bar(ProgressBarOptions options) const;

  /// Finishes the trackers (flushing their files), waits for every rank, then leaves the
  /// process group.
  void end_training();

 private:
  template <typename T>
  static torch::nn::Module& module_of(T& model) {
    if constexpr (std::is_base_of_v<torch::nn::Module, T>) {
      return model;
    } else if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, T>) {
      return *model.ptr();
    } else if constexpr (detail::is_shared_ptr<T>::value || std::is_pointer_v<T>) {
      return module_of(*model);
    } else {
      static_assert(detail::always_false<T>, "acc: expected a torch::nn::Module");
    }
  }

  template <typename T>
  void prepare_one(T& object) {
    if constexpr (std::is_base_of_v<PreparedOptimizerBase, T>) {
      prepare_optimizer(object, &object);
    } else if constexpr (std::is_base_of_v<torch::optim::Optimizer, T>) {
      prepare_optimizer(object, nullptr);
    } else if constexpr (std::is_base_of_v<PreparedSchedulerBase, T>) {
      prepare_scheduler(&object, &object);
      checkpoints_.add_scheduler(object);
    } else if constexpr (std::is_base_of_v<torch::optim::LRScheduler, T>) {
      prepare_scheduler(&object, nullptr);
      checkpoints_.add_scheduler(object);
    } else if constexpr (std::is_base_of_v<torch::nn::Module, T> ||
                         std::is_base_of_v<torch::detail::ModuleHolderIndicator, T>) {
      prepare_model(module_of(object));
    } else if constexpr (detail::is_shared_ptr<T>::value || std::is_pointer_v<T>) {
      if (object == nullptr) throw ConfigError("acc: prepare() got a null pointer");
      prepare_one(*object);
    } else {
      static_assert(detail::always_false<T>,
                    "acc::Accelerator::prepare accepts torch::nn modules (objects, shared_ptr, "
                    "TORCH_MODULE holders, pointers), optimizers and schedulers");
    }
  }

  // Defined in accelerator_data.cpp.
  detail::LoaderContext loader_context() const;
  int64_t samples_to_keep_for_metrics() const;  // -1: keep all

  void prepare_model(torch::nn::Module& model);
  void configure_mixed_precision();
  /// Accelerate's _do_sync: advances the accumulation count; true when this batch syncs.
  bool begin_accumulation_step();
  void unscale_gradients();
  /// How save_state, load_state and save_model lay out models and optimizers (created on first
  /// use: FSDP's layout for its state_dict_type, else the plain one).
  detail::StateDictLayout& state_dict_layout();
  void save_model_weights(const torch::nn::Module& model, const std::string& directory,
                          const std::string& max_shard_size, bool safe_serialization);
  void prepare_optimizer(torch::optim::Optimizer& optimizer, PreparedOptimizerBase* prepared);
  void prepare_scheduler(const void* identity, PreparedSchedulerBase* prepared);
  void warn_about_unprepared_training() const;
  detail::GradientSync* reducer_for(const torch::nn::Module& model) const;

  AcceleratorOptions options_;
  ResolvedOptions resolved_;
  PartialState state_;
  std::shared_ptr<detail::GradientState> gradient_state_;
  struct PreparedModel;
  std::vector<std::unique_ptr<PreparedModel>> models_;
  std::vector<const void*> prepared_objects_;
  bool trigger_ = false;
  std::unique_ptr<detail::TrackerSet> trackers_;  // log_with; see tracking/tracker_set.h
  ProjectConfiguration project_ = options_.project_config();
  detail::CheckpointRegistry checkpoints_;
  std::vector<torch::optim::Optimizer*> optimizers_;  // prepared, for unscaling before clipping
  /// One process, DDP or FSDP (parallel/parallel_strategy.h).
  std::unique_ptr<detail::ParallelStrategy> strategy_;
  std::unique_ptr<detail::StateDictLayout> state_dict_layout_;
  /// Mixed precision: autocast on the thread that prepared the first model, until end_training.
  bool use_autocast_ = false;
  c10::ScalarType autocast_dtype_ = c10::kFloat;
  std::unique_ptr<AutocastGuard> autocast_session_;
};

}  // namespace acc
