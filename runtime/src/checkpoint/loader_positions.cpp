// Data loader positions in checkpoints. A position is what the loader's next iteration does:
// inside an epoch, that epoch (same seed, so the same order) from the first batch the loop has
// not seen; otherwise the next epoch from its start. Batches count what the loop was handed, not
// what libtorch's workers fetched ahead.
#include "checkpoint/loader_positions.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstring>
#include <filesystem>

#include <acc/collectives.h>
#include <acc/checkpoint_model.h>

#include "checkpoint/archive_file.h"

namespace acc::detail {
namespace {

enum Column : int64_t { kSeed, kEpoch, kBatches, kNextEpoch, kNextBatches, kSettled, kColumns };

int64_t as_signed(uint64_t value) {
  int64_t out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

uint64_t as_unsigned(int64_t value) {
  uint64_t out;
  std::memcpy(&out, &value, sizeof out);
  return out;
}

std::vector<int64_t> row(const ShardEpoch& loader) {
  // What a new iteration would do now: the pending epoch and skip (set_epoch, skip_first_batches).
  const int64_t next_epoch = static_cast<int64_t>(loader.epoch);
  const int64_t next_batches = static_cast<int64_t>(loader.skip);
  if (!loader.iterating) return {as_signed(loader.seed), next_epoch, next_batches, next_epoch, next_batches, 1};
  const bool settled = loader.yielded >= loader.batches.size();
  return {as_signed(loader.seed), static_cast<int64_t>(loader.drawn_epoch),
          static_cast<int64_t>(loader.yielded), next_epoch, next_batches, settled ? 1 : 0};
}

}  // namespace

LoaderPositions gather_loader_positions(const std::vector<std::shared_ptr<ShardEpoch>>& loaders) {
  std::vector<int64_t> mine;
  for (const auto& loader : loaders) {
    const auto values = row(*loader);
    mine.insert(mine.end(), values.begin(), values.end());
  }
  const auto count = static_cast<int64_t>(loaders.size());
  const at::Tensor all = acc::gather(at::tensor(mine, at::kLong).reshape({1, count, kColumns})).cpu();
  // A loop that has handed out its last batch on every rank is over: the next iteration starts
  // the next epoch, as it does in the run that goes on. Only while some rank still has batches
  // of the epoch does each rank keep its place inside it (with even_batches(false) a rank may
  // have fewer; it then gets an empty pass, as it did in the uninterrupted run).
  LoaderPositions positions;
  positions.table = at::empty({all.size(0), count, 2}, at::kLong);
  for (int64_t i = 0; i < count; ++i) {
    const auto loader = all.select(1, i);
    const bool over = loader.select(1, kSettled).all().item<bool>();
    positions.table.select(1, i).copy_(over ? loader.slice(1, kNextEpoch, kNextBatches + 1)
                                            : loader.slice(1, kEpoch, kBatches + 1));
    positions.seeds.push_back(as_unsigned(loader[0][kSeed].item<int64_t>()));
  }
  return positions;
}

void save_loader_position(const LoaderPositions& positions, size_t index, const std::string& path) {
  torch::serialize::OutputArchive archive;
  archive.write("seed", c10::IValue(as_signed(positions.seeds[index])));
  archive.write("positions", positions.table.select(1, static_cast<int64_t>(index)).contiguous());
  archive.save_to(path);
}

void load_loader_position(ShardEpoch& loader, const std::string& path, int rank, int num_processes) {
  if (!std::filesystem::exists(path)) {
    throw CheckpointError("acc: the checkpoint has no '" + path +
                          "' for a prepared data loader; it was saved with fewer prepared data "
                          "loaders than this program has. Prepare the extra loaders after "
                          "load_state, or resume from a checkpoint saved by this program");
  }
  auto archive = read_archive(path, c10::Device(c10::kCPU));
  c10::IValue seed;
  at::Tensor table;
  read_values(path, [&] {
    archive.read("seed", seed);
    archive.read("positions", table);
    seed.toInt();  // a foreign value fails here, inside read_values
  });
  if (table.dim() != 2 || table.size(1) != 2 || table.size(0) != num_processes) {
    throw CheckpointError("acc: '" + path + "' holds the data loader position of " +
                          std::to_string(table.dim() == 2 ? table.size(0) : 0) +
                          " processes but this run has " + std::to_string(num_processes) +
                          "; a position counts one rank's batches, so resume with the same number "
                          "of processes (or prepare this loader after load_state to start afresh)");
  }
  loader.seed = as_unsigned(seed.toInt());
  loader.epoch = static_cast<uint64_t>(table[rank][0].item<int64_t>());
  loader.skip = static_cast<size_t>(table[rank][1].item<int64_t>());
}

}  // namespace acc::detail
