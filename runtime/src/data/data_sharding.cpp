// Port of the index arithmetic of Accelerate's BatchSamplerShard (_iter_with_no_split,
// _iter_with_split, __len__); the parity test checks it against Accelerate for a grid of cases.
#include <acc/data_sharding.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <algorithm>
#include <mutex>
#include <string>

namespace acc {

namespace {

// Accelerate concatenates the first batches and doubles them until they cover what the
// completion may need.
IndexBatch repeat_to(IndexBatch data, size_t needed) {
  if (data.empty()) return data;
  while (data.size() < needed) {
    const size_t n = data.size();
    for (size_t i = 0; i < n; ++i) data.push_back(data[i]);
  }
  return data;
}

std::vector<IndexBatch> shard_with_split(const std::vector<IndexBatch>& base, size_t batch_size,
                                         bool drop_last, const ShardOptions& shard) {
  const size_t part = batch_size / shard.num_processes;
  const size_t from = part * shard.process_index;
  auto slice = [&](const IndexBatch& batch) {
    const size_t begin = std::min(from, batch.size());
    const size_t end = std::min(from + part, batch.size());
    return IndexBatch(batch.begin() + begin, batch.begin() + end);
  };
  std::vector<IndexBatch> out;
  for (const auto& batch : base) {
    if (batch.size() == batch_size) out.push_back(slice(batch));
  }
  if (drop_last || base.empty() || base.back().size() >= batch_size) return out;
  const IndexBatch& last = base.back();
  if (!shard.even_batches) {
    if (last.size() > from) out.push_back(slice(last));
  } else {
    IndexBatch completed = last;
    const IndexBatch initial = repeat_to(base.front(), batch_size);
    completed.insert(completed.end(), initial.begin(), initial.end());
    out.push_back(slice(completed));
  }
  return out;
}

std::vector<IndexBatch> shard_without_split(const std::vector<IndexBatch>& base, size_t batch_size,
                                            bool drop_last, const ShardOptions& shard) {
  const size_t processes = shard.num_processes;
  const size_t rank = shard.process_index;
  std::vector<IndexBatch> out;
  IndexBatch initial;
  std::optional<IndexBatch> to_yield;
  for (size_t idx = 0; idx < base.size(); ++idx) {
    const IndexBatch& batch = base[idx];
    if (!drop_last && idx < processes) initial.insert(initial.end(), batch.begin(), batch.end());
    if (idx % processes == rank) to_yield = batch;
    // A group is released only once its last batch is known to be full.
    if (idx % processes == processes - 1 && batch.size() == batch_size) {
      out.push_back(std::move(*to_yield));
      to_yield.reset();
    }
  }
  if (drop_last || initial.empty()) return out;
  if (!shard.even_batches) {
    if (to_yield && !to_yield->empty()) out.push_back(std::move(*to_yield));
    return out;
  }
  if (to_yield && to_yield->size() == batch_size) out.push_back(*to_yield);
  initial = repeat_to(std::move(initial), processes * batch_size);
  // Complete the last group by cycling through the first batches of the epoch.
  size_t idx = base.size() - 1;
  IndexBatch batch = base.back();
  if (batch.size() == batch_size) {
    batch.clear();
    ++idx;
  }
  size_t cycle = 0;
  while (idx % processes != 0 || !batch.empty()) {
    const size_t end = std::min(cycle + batch_size - batch.size(), initial.size());
    batch.insert(batch.end(), initial.begin() + cycle, initial.begin() + end);
    if (idx % processes == rank) out.push_back(batch);
    cycle = end;
    batch.clear();
    ++idx;
  }
  return out;
}

}  // namespace

void check_shard_options(size_t batch_size, const ShardOptions& shard) {
  if (shard.num_processes < 1 || shard.process_index < 0 ||
      shard.process_index >= shard.num_processes) {
    throw ConfigError("acc: process_index " + std::to_string(shard.process_index) +
                      " is outside [0, num_processes=" + std::to_string(shard.num_processes) +
                      ")");
  }
  if (batch_size == 0) {
    throw ConfigError("acc: the data loader's batch size is 0; use a batch size of at least 1");
  }
  if (shard.split_batches && shard.num_processes > 1 && batch_size % shard.num_processes != 0) {
    throw ConfigError(
        "acc: split_batches needs the batch size (" + std::to_string(batch_size) +
        ", the global batch split over the processes) to be a multiple of the number of "
        "processes (" + std::to_string(shard.num_processes) + "); use a batch size of " +
        std::to_string((batch_size / shard.num_processes + 1) * shard.num_processes) +
        " or turn split_batches off");
  }
}

std::vector<IndexBatch> shard_batches(const std::vector<IndexBatch>& base, size_t batch_size,
                                      bool drop_last, const ShardOptions& shard) {
  check_shard_options(batch_size, shard);
  if (shard.num_processes == 1) return base;
  return shard.split_batches ? shard_with_split(base, batch_size, drop_last, shard)
                             : shard_without_split(base, batch_size, drop_last, shard);
}

size_t sharded_length(size_t dataset_size, size_t batch_size, bool drop_last,
                      const ShardOptions& shard) {
  check_shard_options(batch_size, shard);
  const size_t base = drop_last ? dataset_size / batch_size
                                : (dataset_size + batch_size - 1) / batch_size;
  if (shard.num_processes == 1 || shard.split_batches) return base;
  const size_t processes = shard.num_processes;
  if (base % processes == 0) return base / processes;
  const size_t length = base / processes;
  if (drop_last) return length;
  if (shard.even_batches) return length + 1;
  return static_cast<size_t>(shard.process_index) < base % processes ? length + 1 : length;
}

void with_seeded_generator(uint64_t seed, const std::function<void()>& draw) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  at::Tensor saved;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    saved = generator.get_state();
    generator.set_current_seed(seed);
  }
  // Restored even when the sampler throws: the user's random stream must not change.
  struct Restore {
    at::Generator& generator;
    const at::Tensor& saved;
    ~Restore() {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(saved);
    }
  } restore{generator, saved};
  draw();
}

uint64_t fingerprint(const std::vector<IndexBatch>& batches) {
  uint64_t hash = 1469598103934665603ULL;  // FNV-1a over the indices and batch boundaries
  auto mix = [&](uint64_t value) {
    hash ^= value;
    hash *= 1099511628211ULL;
  };
  for (const auto& batch : batches) {
    mix(batch.size());
    for (size_t index : batch) mix(index);
  }
  return hash;
}

}  // namespace acc
