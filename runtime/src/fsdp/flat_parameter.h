#pragma once
// FSDP's flat parameters: a model's trainable parameters regrouped into units, each one flat
// buffer per dtype and device that the parameters become views of (set_data: their TensorImpls,
// and so every reference the user holds, stay valid). A unit is padded to a multiple of the
// shard count, so every rank owns an equal contiguous shard of it.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace acc::detail {

struct FlatParameter {
  std::vector<size_t> members;   // indices into the parameter list given to flatten_parameters
  std::vector<int64_t> offsets;  // element offset of each member in `flat`
  at::Tensor flat;               // the members' values, concatenated, then zero padding
  int64_t shard_numel = 0;       // flat.numel() / shard count
  int64_t shard_offset = 0;      // where this rank's shard starts in `flat`

  at::Tensor shard() const { return flat.narrow(0, shard_offset, shard_numel); }
  /// The part of member `slot` (of `numel` elements) inside this rank's shard, as [begin, end) in
  /// flat coordinates; begin == end when the shard holds none of it.
  std::pair<int64_t, int64_t> local_range(size_t slot, int64_t numel) const;
};

/// Builds units of about `cap_mb` MiB from `params` in reverse order (the order backward produces
/// gradients, so the first unit is complete first), never mixing dtypes or devices, and points
/// every parameter at its slice of its unit.
std::vector<FlatParameter> flatten_parameters(const std::vector<at::Tensor>& params, double cap_mb,
                                              int shard_rank, int shard_count);
/// One unit per group (indices into `params`, in the order given), split by dtype and device.
std::vector<FlatParameter> flatten_parameter_groups(const std::vector<at::Tensor>& params,
                                                    const std::vector<std::vector<size_t>>& groups,
                                                    int shard_rank, int shard_count);

}  // namespace acc::detail
