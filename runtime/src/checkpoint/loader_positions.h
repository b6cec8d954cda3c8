#pragma once
// The prepared data loaders' part of save_state / load_state: where each loader's next iteration
// starts, on every rank (sampler.bin, sampler_1.bin, ...).
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include <acc/data_sharding.h>

namespace acc::detail {

/// Every rank's position of every loader: `table[rank][loader]` = (epoch, batches consumed of
/// that epoch), `seeds[loader]` the shuffle seed all ranks share.
struct LoaderPositions {
  std::vector<uint64_t> seeds;
  at::Tensor table;  // int64 [ranks, loaders, 2]
};

/// Collective (one all-gather): every rank must call it with its loaders in preparation order.
LoaderPositions gather_loader_positions(const std::vector<std::shared_ptr<ShardEpoch>>& loaders);

/// Writes loader `index`'s seed and per-rank positions to `path` (a libtorch archive).
void save_loader_position(const LoaderPositions& positions, size_t index, const std::string& path);

/// Restores `loader` from `path`: its next iteration draws the saved epoch with the saved seed
/// and starts after the batches this rank had consumed.
void load_loader_position(ShardEpoch& loader, const std::string& path, int rank, int num_processes);

}  // namespace acc::detail
