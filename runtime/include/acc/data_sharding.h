#pragma once
// Accelerate's BatchSamplerShard for libtorch: which batches of indices each rank loads.
// The base sampler's index stream for the epoch is cut into batches (as torch's BatchSampler
// does), then each rank keeps its share exactly as Accelerate does (reference:
// accelerate-semantics.md §3). Randomness comes from torch's default CPU generator, seeded from a
// seed shared by all ranks plus the epoch, so every rank walks the same permutation.
#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include <acc/errors.h>

namespace acc {

using IndexBatch = std::vector<size_t>;

/// How one rank's share is chosen (Accelerate's BatchSamplerShard arguments).
struct ShardOptions {
  int num_processes = 1;
  int process_index = 0;
  /// Slice every batch into num_processes parts instead of dealing out whole batches.
  bool split_batches = false;
  /// Complete the last group of batches from the start of the epoch so all ranks get as many.
  bool even_batches = true;
};

/// Rank `shard.process_index`'s batches, given the epoch's base batches (batch size
/// `batch_size`, the last one possibly short; already without it when `drop_last`). On one
/// process the base batches are returned unchanged, as Accelerate does not shard then.
std::vector<IndexBatch> shard_batches(const std::vector<IndexBatch>& base, size_t batch_size,
                                      bool drop_last, const ShardOptions& shard);

/// The number of batches shard_batches gives this rank for `dataset_size` indices (len()).
size_t sharded_length(size_t dataset_size, size_t batch_size, bool drop_last,
                      const ShardOptions& shard);

/// Throws ConfigError unless the options can shard batches of `batch_size`.
void check_shard_options(size_t batch_size, const ShardOptions& shard);

/// Runs `draw` with torch's default CPU generator seeded with `seed`, then restores the
/// generator's previous state (the user's random stream is left untouched).
void with_seeded_generator(uint64_t seed, const std::function<void()>& draw);

/// The same value for the same index stream on every machine (checks ranks agree).
uint64_t fingerprint(const std::vector<IndexBatch>& batches);

namespace detail {
/// An epoch's batches of indices stored back to back in one buffer that later epochs reuse:
/// one allocation per batch, all alive at once until the batch is loaded, made drawing an
/// epoch cost a noticeable part of loading it when batches are cheap.
class IndexBatches {
 public:
  size_t size() const { return ends_.size(); }
  void clear() {
    indices_.clear();
    ends_.clear();
  }
  void push_back(const IndexBatch& batch) {
    indices_.insert(indices_.end(), batch.begin(), batch.end());
    ends_.push_back(indices_.size());
  }
  void pop_back() {
    ends_.pop_back();
    indices_.resize(ends_.empty() ? 0 : ends_.back());
  }
  size_t batch_size(size_t i) const { return ends_[i] - begin(i); }
  IndexBatch operator[](size_t i) const {
    return IndexBatch(indices_.begin() + static_cast<std::ptrdiff_t>(begin(i)),
                      indices_.begin() + static_cast<std::ptrdiff_t>(ends_[i]));
  }

 private:
  size_t begin(size_t i) const { return i == 0 ? 0 : ends_[i - 1]; }
  std::vector<size_t> indices_;
  std::vector<size_t> ends_;  // ends_[i]: one past batch i's last index in indices_
};

/// The epoch's result, shared between the sampler (inside libtorch's loader) and acc's loader.
struct ShardEpoch {
  uint64_t seed = 0;
  uint64_t epoch = 0;             // epoch the next reset() draws
  uint64_t drawn_epoch = 0;       // epoch of `batches`
  size_t skip = 0;                // batches the next reset() skips (one-shot)
  bool drawn = false;
  uint64_t stream_fingerprint = 0;
  IndexBatches batches;           // this rank's batches of the drawn epoch
  size_t position = 0;            // next batch the sampler hands libtorch (runs ahead: prefetch)
  size_t first = 0;               // batches of the drawn epoch skipped at reset()
  // Kept by the loader, not the sampler: libtorch's workers fetch ahead of what the loop sees.
  bool iterating = false;         // a loop is inside the drawn epoch
  size_t yielded = 0;             // batches of the drawn epoch handed to the loop, skipped included
};
}  // namespace detail

/// A libtorch batch sampler (requests are vectors of indices) giving one rank's batches. Each
/// reset() starts a new epoch: the base sampler is reset under the generator seeded with
/// seed + epoch, its whole stream is drawn, cut into batches and sharded; the epoch then advances.
template <typename BaseSampler>
class BatchSamplerShard : public torch::data::samplers::Sampler<IndexBatch> {
  static_assert(std::is_same_v<typename BaseSampler::BatchRequestType, IndexBatch>,
                "acc: the prepared data loader shards index samplers (BatchRequestType "
                "std::vector<size_t>, e.g. RandomSampler, SequentialSampler). A StreamSampler "
                "cannot be sharded by index: split the stream per rank yourself using "
                "accelerator.process_index() and use torch::data::make_data_loader");

 public:
  BatchSamplerShard(BaseSampler base, size_t batch_size, bool drop_last, ShardOptions shard,
                    uint64_t seed = 0)
      : base_(std::move(base)),
        batch_size_(batch_size),
        drop_last_(drop_last),
        shard_(shard),
        state_(std::make_shared<detail::ShardEpoch>()) {
    check_shard_options(batch_size, shard);
    state_->seed = seed;
  }

  void reset(std::optional<size_t> new_size = std::nullopt) override {
    auto& s = *state_;
    // One process: nothing to shard and no rank to compare with, so the stream goes straight
    // into the epoch's batches rather than being kept, hashed and dealt out (O(dataset) work
    // that cheap batches feel).
    const bool alone = shard_.num_processes == 1;
    std::vector<IndexBatch> base;
    s.batches.clear();
    with_seeded_generator(s.seed + s.epoch, [&] {
      base_.reset(new_size);
      while (auto batch = base_.next(batch_size_)) {
        if (batch->empty()) break;
        if (alone) {
          s.batches.push_back(*batch);
        } else {
          base.push_back(std::move(*batch));
        }
      }
    });
    if (alone) {
      const size_t n = s.batches.size();
      if (drop_last_ && n > 0 && s.batches.batch_size(n - 1) < batch_size_) s.batches.pop_back();
      s.stream_fingerprint = 0;
    } else {
      if (drop_last_ && !base.empty() && base.back().size() < batch_size_) base.pop_back();
      s.stream_fingerprint = fingerprint(base);
      for (const auto& batch : shard_batches(base, batch_size_, drop_last_, shard_)) {
        s.batches.push_back(batch);
      }
    }
    s.position = std::min(s.skip, s.batches.size());
    s.first = s.position;
    s.skip = 0;
    s.drawn = true;
    s.drawn_epoch = s.epoch;
    s.epoch += 1;
  }

  std::optional<IndexBatch> next(size_t /*batch_size: fixed at construction*/) override {
    auto& s = *state_;
    if (s.position >= s.batches.size()) return std::nullopt;
    return s.batches[s.position++];
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    archive.write("acc_shard_epoch", static_cast<int64_t>(state_->epoch));
    base_.save(archive);
  }
  void load(torch::serialize::InputArchive& archive) override {
    c10::IValue epoch;
    archive.read("acc_shard_epoch", epoch);
    state_->epoch = static_cast<uint64_t>(epoch.toInt());
    base_.load(archive);
  }

  /// Epoch drawn by the next reset(); Accelerate's set_epoch.
  void set_epoch(uint64_t epoch) { state_->epoch = epoch; }
  uint64_t epoch() const { return state_->epoch; }
  size_t batch_size() const { return batch_size_; }
  bool drop_last() const { return drop_last_; }
  const ShardOptions& shard() const { return shard_; }
  /// State shared with the loader that owns a copy of this sampler.
  std::shared_ptr<detail::ShardEpoch> epoch_state() const { return state_; }

 private:
  BaseSampler base_;
  size_t batch_size_;
  bool drop_last_;
  ShardOptions shard_;
  std::shared_ptr<detail::ShardEpoch> state_;
};

}  // namespace acc
