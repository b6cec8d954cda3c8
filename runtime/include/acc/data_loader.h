#pragma once
// The prepared data loader (Accelerate's DataLoaderShard): libtorch's StatelessDataLoader over a
// BatchSamplerShard, so that each rank loads only its batches (workers included), plus what
// Accelerate adds around it: batches moved to the device with acc::to_device, a one-batch
// lookahead so that the end of the loader is known while its last batch is processed, the
// remainder that gather_for_metrics trims, epochs (set_epoch) and skipping (resume mid-epoch).
// Made by Accelerator::prepare_data_loader, which mirrors torch::data::make_data_loader.
#include <torch/data/dataloader/stateless.h>
#include <torch/data/dataloader_options.h>
#include <torch/data/iterator.h>
#include <torch/data/samplers/sequential.h>

#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include <acc/detail/data_loader_state.h>
#include <acc/data_sharding.h>
#include <acc/to_device.h>

namespace acc {

namespace detail {
/// What the Accelerator passes to the loaders it prepares.
struct LoaderContext {
  std::optional<c10::Device> device;  // nullopt: device_placement(false)
  bool non_blocking = false;
  std::shared_ptr<GradientState> gradient_state;
  ShardOptions shard;
  uint64_t seed = 0;
};

/// A seed drawn by rank 0 from torch's default generator and broadcast (collective).
uint64_t shared_data_seed();
/// Throws DistributedError when ranks drew different index streams (no-op on one process).
void check_same_index_stream(uint64_t fingerprint, uint64_t epoch);
}  // namespace detail

template <typename Dataset, typename Sampler>
class DataLoader {
 public:
  using Batch = typename Dataset::BatchType;
  using ShardSampler = BatchSamplerShard<Sampler>;

  /// Single-pass iterator (like libtorch's); `for (auto& batch : *loader)`.
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    using pointer = Batch*;
    using reference = Batch&;

    Iterator() = default;  // the end
    Iterator(Iterator&& other) noexcept : loader_(std::exchange(other.loader_, nullptr)) {}
    Iterator& operator=(Iterator&& other) noexcept {
      std::swap(loader_, other.loader_);
      return *this;
    }
    Iterator(const Iterator&) = delete;
    Iterator& operator=(const Iterator&) = delete;
    // Leaving the loop early (break, exception) also takes the loader off the active stack.
    ~Iterator() {
      if (loader_ != nullptr) loader_->finish();
    }

    Batch& operator*() const { return *loader_->current_; }
    Batch* operator->() const { return &*loader_->current_; }
    Iterator& operator++() {
      if (!loader_->advance()) {
        loader_->finish();
        loader_ = nullptr;
      }
      return *this;
    }
    bool operator==(const Iterator& other) const { return loader_ == other.loader_; }
    bool operator!=(const Iterator& other) const { return loader_ != other.loader_; }

   private:
    friend class DataLoader;
    explicit Iterator(DataLoader* loader) : loader_(loader) {}
    DataLoader* loader_ = nullptr;
  };

  DataLoader(Dataset dataset, ShardSampler sampler, torch::data::DataLoaderOptions options,
             detail::LoaderContext context)
      : options_(options),
        context_(std::move(context)),
        epoch_(sampler.epoch_state()),
        batch_size_(sampler.batch_size()),
        drop_last_(sampler.drop_last()) {
    const auto size = dataset.size();
    if (size) dataset_size_ = static_cast<int64_t>(*size);
    // acc drops the short batch itself (before sharding); libtorch must pass every batch on.
    auto inner_options = options;
    inner_options.drop_last(false);
    inner_ = std::make_unique<Inner>(std::move(dataset), std::move(sampler), inner_options);
    inner_end_.emplace(inner_->end());
  }

  /// Starts an epoch: draws this epoch's order (the same on every rank), then yields this
  /// rank's batches, on the device. Each new iteration advances the epoch.
  Iterator begin() {
    start();
    if (!current_) {
      finish();
      return Iterator();
    }
    return Iterator(this);
  }
  Iterator end() { return Iterator(); }

  /// This rank's number of batches per epoch (Accelerate's len(dataloader)).
  size_t size() const {
    if (dataset_size_ < 0) return epoch_->batches.size();
    return sharded_length(static_cast<size_t>(dataset_size_), batch_size_, drop_last_,
                          context_.shard);
  }
  /// The epoch the next iteration draws; each iteration advances it by one.
  void set_epoch(uint64_t epoch) { epoch_->epoch = epoch; }
  uint64_t epoch() const { return epoch_->epoch; }
  /// The next iteration skips its first `n` batches (resuming inside an epoch) without loading
  /// them; later iterations are complete again.
  void skip_first_batches(size_t n) { epoch_->skip = n; }
  /// Samples per optimizer step over all ranks.
  size_t total_batch_size() const {
    return context_.shard.split_batches ? batch_size_
                                        : batch_size_ * context_.shard.num_processes;
  }
  const DataLoaderState& state() const { return state_; }
  bool end_of_dataloader() const { return state_.end_of_dataloader; }
  int64_t remainder() const { return state_.remainder; }
  const torch::data::DataLoaderOptions& options() const { return options_; }
  /// The position save_state keeps and load_state restores (Accelerator::prepare_data_loader
  /// registers it with the CheckpointRegistry).
  std::shared_ptr<detail::ShardEpoch> position() const { return epoch_; }
  /// Joins libtorch's worker threads.
  void join() { inner_->join(); }

 private:
  using Inner = torch::data::StatelessDataLoader<Dataset, ShardSampler>;

  void start() {
    finish();
    state_ = DataLoaderState{};
    if (!drop_last_ && dataset_size_ >= 0) {
      state_.remainder = dataset_size_ % static_cast<int64_t>(total_batch_size());
    }
    current_.reset();  // a loop left early keeps its batches until here
    next_.reset();
    inner_it_.emplace(inner_->begin());  // resets the sampler: draws the epoch
    detail::check_same_index_stream(epoch_->stream_fingerprint, epoch_->drawn_epoch);
    epoch_->iterating = true;
    epoch_->yielded = epoch_->first;
    if (context_.gradient_state) {
      detail::begin_dataloader(*context_.gradient_state, &state_);
      registered_ = true;
    }
    if (!pull(current_)) return;
    ++epoch_->yielded;
    place(*current_);
    state_.end_of_dataloader = !pull(next_);
  }

  // Moves to the next batch; false at the end of the epoch. The two buffers trade places, so no
  // optional is built or torn down per batch.
  bool advance() {
    if (!next_) return false;
    std::swap(current_, next_);
    ++epoch_->yielded;
    place(*current_);
    state_.end_of_dataloader = !pull(next_);
    return true;
  }

  void finish() {
    epoch_->iterating = false;
    if (registered_) detail::end_dataloader(*context_.gradient_state, &state_);
    registered_ = false;
  }

  // Loads libtorch's next batch into `slot` (released first, so that no more batches are alive
  // than the lookahead needs); empties it at the end of the epoch.
  bool pull(std::optional<Batch>& slot) {
    auto& it = *inner_it_;
    if (it == *inner_end_) {
      slot.reset();
      return false;
    }
    slot = std::move(*it);
    ++it;
    return true;
  }

  void place(Batch& batch) const {
    if (context_.device) detail::place_in(batch, *context_.device, context_.non_blocking);
  }

  torch::data::DataLoaderOptions options_;
  detail::LoaderContext context_;
  std::shared_ptr<detail::ShardEpoch> epoch_;
  size_t batch_size_;
  bool drop_last_;
  int64_t dataset_size_ = -1;
  std::unique_ptr<Inner> inner_;
  std::optional<torch::data::Iterator<Batch>> inner_it_;
  std::optional<torch::data::Iterator<Batch>> inner_end_;
  std::optional<Batch> current_;
  std::optional<Batch> next_;
  DataLoaderState state_;
  bool registered_ = false;
};

namespace detail {
template <typename Dataset, typename Sampler>
std::unique_ptr<DataLoader<Dataset, Sampler>> make_prepared_loader(
    Dataset dataset, Sampler sampler, torch::data::DataLoaderOptions options,
    LoaderContext context) {
  static_assert(!Dataset::is_stateful,
                "acc: a stateful dataset (torch::data::datasets::StatefulDataset) produces its own "
                "batches, so acc cannot give each rank different ones. Shard it yourself (e.g. "
                "read only the files of accelerator.process_index()) and use "
                "torch::data::make_data_loader, or make it a map-style Dataset with get(index).");
  // As Accelerate, draw the shared shuffle seed from torch's generator only for a sampler that may
  // shuffle: an in-order loader leaves the user's random stream as one process without acc had it.
  if constexpr (!std::is_same_v<Sampler, torch::data::samplers::SequentialSampler>) {
    context.seed = shared_data_seed();
  }
  BatchSamplerShard<Sampler> shard(std::move(sampler), options.batch_size(), options.drop_last(),
                                   context.shard, context.seed);
  return std::make_unique<DataLoader<Dataset, Sampler>>(std::move(dataset), std::move(shard),
                                                        options, std::move(context));
}
}  // namespace detail

}  // namespace acc
