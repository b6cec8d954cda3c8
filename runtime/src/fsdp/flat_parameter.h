#pragma once
// FSDP's flat parameters: a model's trainable parameters regrouped into units, each one flat
// buffer per dtype and device that the parameters become views of (set_data: their TensorImpls,
// and so every reference the user holds, stay valid). A unit is padded to a multiple of the
// shard count, so every rank owns an equal contiguous shard of it.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

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

// Parameters without data (meta tensors: a model built empty on this rank) count as being on
// `meta_device`, where their unit is allocated, so that every rank plans the same units.

/// The members of each unit, as indices into `params`: units of about `cap_mb` MiB in reverse order
/// (the order backward produces gradients, so the first unit is complete first), never mixing
/// dtypes or devices.
std::vector<std::vector<size_t>> plan_units(const std::vector<at::Tensor>& params, double cap_mb,
                                            c10::Device meta_device);
/// One unit per group (indices into `params`, in the order given), split by dtype and device.
std::vector<std::vector<size_t>> plan_unit_groups(const std::vector<at::Tensor>& params,
                                                  const std::vector<std::vector<size_t>>& groups,
                                                  c10::Device meta_device);
/// The unit of `members` laid out (offsets, shard size) but not allocated: `flat` is a meta tensor
/// of the unit's padded size and dtype. Its device is unit_device().
FlatParameter plan_unit(const std::vector<at::Tensor>& params, std::vector<size_t> members, int shard_rank,
                        int shard_count);
c10::Device unit_device(const std::vector<at::Tensor>& params, const FlatParameter& unit, c10::Device meta_device);
/// Allocates a planned unit whole on `device`, copies its members' values into it and points every
/// member at its slice; a meta member is not copied (its slice is uninitialised until the caller
/// fills the unit). `released_at_rest` (FULL_SHARD): its memory comes from empty_unit.
void allocate_unit(FlatParameter& unit, const std::vector<at::Tensor>& params, c10::Device device,
                   bool released_at_rest);

}  // namespace acc::detail
