#include "fsdp/flat_parameter.h"

#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <map>
#include <string>

#include <acc/detail/bucket_size.h>

#include "parallel/meta_tensors.h"
#include "fsdp/unit_memory.h"

namespace acc::detail {

std::pair<int64_t, int64_t> FlatParameter::local_range(size_t slot, int64_t numel) const {
  const int64_t begin = std::max(offsets[slot], shard_offset);
  const int64_t end = std::min(offsets[slot] + numel, shard_offset + shard_numel);
  return begin < end ? std::make_pair(begin, end) : std::make_pair(begin, begin);
}

namespace {
c10::Device device_of(const at::Tensor& param, c10::Device meta_device) {
  return param.is_meta() ? meta_device : param.device();
}
}  // namespace

FlatParameter plan_unit(const std::vector<at::Tensor>& params, std::vector<size_t> members, int shard_rank,
                        int shard_count) {
  FlatParameter unit;
  int64_t numel = 0;
  for (size_t index : members) {
    unit.offsets.push_back(numel);
    numel += params[index].numel();
  }
  const int64_t padded = (numel + shard_count - 1) / shard_count * shard_count;
  unit.shard_numel = padded / shard_count;
  unit.shard_offset = unit.shard_numel * shard_rank;
  unit.flat = at::empty({padded}, params[members.front()].options().device(c10::kMeta).requires_grad(false));
  unit.members = std::move(members);
  return unit;
}

c10::Device unit_device(const std::vector<at::Tensor>& params, const FlatParameter& unit, c10::Device meta_device) {
  return device_of(params[unit.members.front()], meta_device);
}

void allocate_unit(FlatParameter& unit, const std::vector<at::Tensor>& params, c10::Device device,
                   bool released_at_rest) {
  c10::NoGradGuard no_grad;
  const auto& members = unit.members;
  const int64_t padded = unit.flat.numel();
  const int64_t used = unit.offsets.back() + params[members.back()].numel();
  const auto options = unit.flat.options().device(device);
  unit.flat = released_at_rest ? empty_unit(padded, options) : at::empty({padded}, options);
  unit.flat.narrow(0, used, padded - used).zero_();  // the rest is copied in or filled
  for (size_t j = 0; j < members.size(); ++j) {
    auto p = params[members[j]];
    auto view = unit.flat.narrow(0, unit.offsets[j], p.numel()).view(p.sizes());
    if (!p.is_meta()) view.copy_(p);
    materialize(p, view);
  }
}

std::vector<std::vector<size_t>> plan_units(const std::vector<at::Tensor>& params, double cap_mb,
                                            c10::Device meta_device) {
  const auto cap_bytes = mib_to_bytes(cap_mb);
  std::map<std::pair<int, std::string>, std::vector<size_t>> open;
  std::map<std::pair<int, std::string>, int64_t> open_bytes;
  std::vector<std::vector<size_t>> layout;
  for (size_t k = params.size(); k-- > 0;) {
    const auto& p = params[k];
    auto key = std::make_pair(static_cast<int>(p.scalar_type()), device_of(p, meta_device).str());
    open[key].push_back(k);
    open_bytes[key] += p.numel() * static_cast<int64_t>(p.element_size());
    if (open_bytes[key] >= cap_bytes) {
      layout.push_back(std::move(open[key]));
      open.erase(key);
      open_bytes.erase(key);
    }
  }
  for (auto& [key, members] : open) layout.push_back(std::move(members));
  return layout;
}

std::vector<std::vector<size_t>> plan_unit_groups(const std::vector<at::Tensor>& params,
                                                  const std::vector<std::vector<size_t>>& groups,
                                                  c10::Device meta_device) {
  std::vector<std::vector<size_t>> layout;
  for (const auto& group : groups) {
    std::map<std::pair<int, std::string>, std::vector<size_t>> by_kind;
    std::vector<std::pair<int, std::string>> order;
    for (size_t k : group) {
      auto key = std::make_pair(static_cast<int>(params[k].scalar_type()), device_of(params[k], meta_device).str());
      if (by_kind.count(key) == 0) order.push_back(key);
      by_kind[key].push_back(k);
    }
    for (const auto& key : order) layout.push_back(std::move(by_kind[key]));
  }
  return layout;
}

}  // namespace acc::detail
