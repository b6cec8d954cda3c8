#include "fsdp/flat_parameter.h"

#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <map>
#include <string>

#include <acc/detail/bucket_size.h>

namespace acc::detail {

std::pair<int64_t, int64_t> FlatParameter::local_range(size_t slot, int64_t numel) const {
  const int64_t begin = std::max(offsets[slot], shard_offset);
  const int64_t end = std::min(offsets[slot] + numel, shard_offset + shard_numel);
  return begin < end ? std::make_pair(begin, end) : std::make_pair(begin, begin);
}

namespace {
// Points every parameter of each unit of `layout` at its slice of the unit's new flat buffer.
std::vector<FlatParameter> build_units(const std::vector<at::Tensor>& params,
                                       std::vector<std::vector<size_t>> layout, int shard_rank,
                                       int shard_count) {
  c10::NoGradGuard no_grad;
  std::vector<FlatParameter> units;
  for (auto& members : layout) {
    FlatParameter unit;
    int64_t numel = 0;
    for (size_t index : members) {
      unit.offsets.push_back(numel);
      numel += params[index].numel();
    }
    const int64_t padded = (numel + shard_count - 1) / shard_count * shard_count;
    unit.flat = at::zeros({padded}, params[members.front()].options().requires_grad(false));
    unit.shard_numel = padded / shard_count;
    unit.shard_offset = unit.shard_numel * shard_rank;
    for (size_t j = 0; j < members.size(); ++j) {
      auto p = params[members[j]];
      auto view = unit.flat.narrow(0, unit.offsets[j], p.numel()).view(p.sizes());
      view.copy_(p);
      p.set_data(view);
    }
    unit.members = std::move(members);
    units.push_back(std::move(unit));
  }
  return units;
}
}  // namespace

std::vector<FlatParameter> flatten_parameters(const std::vector<at::Tensor>& params, double cap_mb,
                                              int shard_rank, int shard_count) {
  const auto cap_bytes = mib_to_bytes(cap_mb);
  std::map<std::pair<int, std::string>, std::vector<size_t>> open;
  std::map<std::pair<int, std::string>, int64_t> open_bytes;
  std::vector<std::vector<size_t>> layout;
  for (size_t k = params.size(); k-- > 0;) {
    const auto& p = params[k];
    auto key = std::make_pair(static_cast<int>(p.scalar_type()), p.device().str());
    open[key].push_back(k);
    open_bytes[key] += p.numel() * static_cast<int64_t>(p.element_size());
    if (open_bytes[key] >= cap_bytes) {
      layout.push_back(std::move(open[key]));
      open.erase(key);
      open_bytes.erase(key);
    }
  }
  for (auto& [key, members] : open) layout.push_back(std::move(members));
  return build_units(params, std::move(layout), shard_rank, shard_count);
}

std::vector<FlatParameter> flatten_parameter_groups(const std::vector<at::Tensor>& params,
                                                    const std::vector<std::vector<size_t>>& groups,
                                                    int shard_rank, int shard_count) {
  std::vector<std::vector<size_t>> layout;
  for (const auto& group : groups) {
    std::map<std::pair<int, std::string>, std::vector<size_t>> by_kind;
    std::vector<std::pair<int, std::string>> order;
    for (size_t k : group) {
      auto key = std::make_pair(static_cast<int>(params[k].scalar_type()), params[k].device().str());
      if (by_kind.count(key) == 0) order.push_back(key);
      by_kind[key].push_back(k);
    }
    for (const auto& key : order) layout.push_back(std::move(by_kind[key]));
  }
  return build_units(params, std::move(layout), shard_rank, shard_count);
}

}  // namespace acc::detail
