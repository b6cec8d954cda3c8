// The non-template parts of the prepared data loader: the seed all ranks shuffle with, and the
// check that ranks agree on the order.
#include <acc/data_loader.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>

#include <string>

#include <acc/collectives.h>
#include <acc/errors.h>
#include <acc/state.h>

namespace acc::detail {

uint64_t shared_data_seed() {
  // Drawn like Accelerate's prepare_data_loader draws its sampler seed, so acc::set_seed
  // decides the shuffles; rank 0's draw wins so that every rank shuffles alike.
  auto seed = at::empty({1}, at::TensorOptions().dtype(at::kLong)).random_();
  if (PartialState().num_processes() > 1) seed = acc::broadcast(seed, 0);
  return static_cast<uint64_t>(seed.item<int64_t>());
}

void check_same_index_stream(uint64_t fingerprint, uint64_t epoch) {
  PartialState state;
  if (state.num_processes() == 1) return;
  // 62 bits keep the value and its negation exact in int64; max of both = min and max.
  const int64_t value = static_cast<int64_t>(fingerprint >> 2);
  auto both = at::tensor({value, -value}, at::TensorOptions().dtype(at::kLong));
  both = acc::reduce(both, ReduceOp::MAX);
  if (both[0].item<int64_t>() == value && -both[1].item<int64_t>() == value) return;
  throw DistributedError(
      "acc: the ranks drew different sample orders for epoch " + std::to_string(epoch) +
      " of a prepared data loader, so they would not share the data out correctly. A custom "
      "sampler must be deterministic or draw its randomness from torch's default generator in "
      "reset() (acc seeds it with the same seed on every rank); and every rank must prepare "
      "the same dataset.");
}

}  // namespace acc::detail
