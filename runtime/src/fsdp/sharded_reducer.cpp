#include "fsdp/sharded_reducer.h"

#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/GradMode.h>

#include <acc/errors.h>

#include "comm/process_group.h"

namespace acc::detail {

ShardedReducer::ShardedReducer(std::vector<NamedTensor> parameters, ProcessGroup& shard_group,
                               ProcessGroup* replica_group, int world_size, ShardedReducerOptions options)
    : params_(std::move(parameters)),
      shard_group_(shard_group),
      replica_group_(replica_group),
      world_size_(world_size),
      offload_(options.offload),
      shard_at_rest_(options.shard_at_rest),
      ready_(params_.size(), false) {
  world_divisor_ = at::scalar_tensor(static_cast<double>(world_size_), at::TensorOptions().dtype(at::kFloat));
  std::vector<at::Tensor> tensors;
  for (const auto& p : params_) tensors.push_back(p.tensor);
  auto layout = options.groups.empty() ? plan_units(tensors, options.bucket_cap_mb, options.device)
                                       : plan_unit_groups(tensors, options.groups, options.device);
  std::vector<size_t> group_of(params_.size(), 0);
  for (size_t g = 0; g < options.groups.size(); ++g) {
    for (size_t i : options.groups[g]) group_of[i] = g;
  }
  const size_t count = layout.size();
  state_.resize(count);
  unit_of_.assign(params_.size(), 0);
  slot_of_.assign(params_.size(), 0);
  pieces_.resize(params_.size());
  masters_.resize(count);
  gathered_.assign(count, true);
  prefetches_.resize(count);
  whole_at_rest_.assign(count, true);
  members_done_.assign(count, 0);
  member_seen_.assign(params_.size(), false);
  // One unit at a time: built whole, filled from rank 0, its shard kept, and (start_released)
  // released before the next is built, so a rank that built the model empty holds at most its
  // shards and one unit whole (its memory really returns: fsdp/unit_memory.h).
  for (size_t u = 0; u < count; ++u) {
    const size_t group = group_of[layout[u].front()];
    units_.push_back(plan_unit(tensors, std::move(layout[u]), shard_group_.rank(), shard_group_.size()));
    auto& unit = units_[u];
    const auto device = unit_device(tensors, unit, options.device);
    if (offload_ || shard_at_rest_) {
      auto master = unit.flat.options().device(offload_ ? c10::Device(at::kCPU) : device);
      masters_[u] = at::empty({unit.shard_numel}, master.pinned_memory(offload_ && device.is_cuda()));
    }
    allocate_unit(unit, tensors, device, shard_at_rest_);
    if (options.fill_from != nullptr) {
      auto flat = unit.flat;
      options.fill_from->broadcast_(flat, 0, "prepare (rank 0's weights, FSDP unit " + std::to_string(u + 1) +
                                                 " of " + std::to_string(count) + ")");
    }
    state_[u].pending = unit.members.size();
    if (masters_[u].defined()) masters_[u].copy_(unit.shard());
    for (size_t j = 0; j < unit.members.size(); ++j) {
      const size_t i = unit.members[j];
      unit_of_[i] = u;
      slot_of_[i] = j;
      auto [begin, end] = unit.local_range(j, params_[i].tensor.numel());
      if (begin < end) {
        pieces_[i] = masters_[u].defined() ? masters_[u].narrow(0, begin - unit.shard_offset, end - begin)
                                           : unit.flat.narrow(0, begin, end - begin);
        unit_of_piece_[pieces_[i].unsafeGetTensorImpl()] = u;
      }
    }
    if (shard_at_rest_ && group < options.start_released.size() && options.start_released[group]) {
      whole_at_rest_[u] = false;
      release(u);
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) index_of_[params_[i].tensor.unsafeGetTensorImpl()] = i;
  attach_hooks(params_);
}

ShardedReducer::~ShardedReducer() { detach_hooks(); }

at::Tensor ShardedReducer::local_piece(const at::Tensor& param, bool* found) const {
  auto it = index_of_.find(param.unsafeGetTensorImpl());
  *found = it != index_of_.end();
  return *found ? pieces_[it->second] : at::Tensor();
}

std::optional<size_t> ShardedReducer::index_of(const at::Tensor& param) const {
  auto it = index_of_.find(param.unsafeGetTensorImpl());
  if (it == index_of_.end()) return std::nullopt;
  return it->second;
}

std::pair<int64_t, int64_t> ShardedReducer::piece_range(size_t index) const {
  const auto& unit = units_[unit_of_[index]];
  const auto slot = slot_of_[index];
  const auto [begin, end] = unit.local_range(slot, params_[index].tensor.numel());
  return {begin - unit.offsets[slot], end - unit.offsets[slot]};
}

size_t ShardedReducer::unit_of_piece(const at::Tensor& tensor) const {
  auto it = unit_of_piece_.find(tensor.unsafeGetTensorImpl());
  return it == unit_of_piece_.end() ? kNoUnit : it->second;
}

void ShardedReducer::on_gradient_ready(size_t param) {
  if (ready_[param]) return;
  auto& tensor = params_[param].tensor;
  const auto grad = tensor.grad();
  if (grad.is_sparse()) {
    throw Error("acc: parameter '" + params_[param].name +
                "' has a sparse gradient, which FSDP in acc does not shard; construct the "
                "embedding with sparse(false)");
  }
  store_gradient(param, grad);
  // Its unit's buffer holds the gradient now; the full-size .grad is not kept (ZeRO-2).
  tensor.mutable_grad() = at::Tensor();
  release_sent_gradients();
  if (--state_[unit_of_[param]].pending == 0) launch_ready_units();
  member_done(param);
}

void ShardedReducer::on_gradient_unsynced(size_t param) { member_done(param); }

void ShardedReducer::finish_unsynced_backward() { units_done_at_end(); }

void ShardedReducer::member_done(size_t param) {
  if (member_seen_[param]) return;
  member_seen_[param] = true;
  const size_t u = unit_of_[param];
  if (++members_done_[u] == units_[u].members.size() && on_unit_done_) on_unit_done_(u);
}

void ShardedReducer::units_done_at_end() {
  for (size_t u = 0; u < units_.size(); ++u) {
    if (members_done_[u] < units_[u].members.size() && on_unit_done_) on_unit_done_(u);
    members_done_[u] = 0;
  }
  std::fill(member_seen_.begin(), member_seen_.end(), false);
}

void ShardedReducer::acquire_buffer(size_t u) {
  const auto& unit = units_[u];
  auto& state = state_[u];
  const int64_t numel = unit.flat.numel();
  auto best = free_buffers_.end();
  for (auto it = free_buffers_.begin(); it != free_buffers_.end(); ++it) {
    if (it->numel() >= numel && it->options().type_equal(unit.flat.options()) &&
        it->device() == unit.flat.device() && (best == free_buffers_.end() || it->numel() < best->numel())) {
      best = it;
    }
  }
  if (best != free_buffers_.end()) {
    state.buffer = std::move(*best);
    free_buffers_.erase(best);
  } else {
    state.buffer = at::empty({numel}, unit.flat.options());
  }
  state.full_grad = state.buffer.narrow(0, 0, numel);
  // The padding contributes nothing.
  const size_t last = unit.members.size() - 1;
  const int64_t used = unit.offsets[last] + params_[unit.members[last]].tensor.numel();
  state.full_grad.narrow(0, used, numel - used).zero_();
}

void ShardedReducer::release_buffer(size_t u) {
  auto& state = state_[u];
  state.full_grad.reset();
  if (state.buffer.defined()) free_buffers_.push_back(std::move(state.buffer));
  state.buffer.reset();
}

void ShardedReducer::store_gradient(size_t param, const at::Tensor& grad) {
  c10::NoGradGuard no_grad;
  const auto& unit = units_[unit_of_[param]];
  auto& state = state_[unit_of_[param]];
  if (!state.full_grad.defined()) acquire_buffer(unit_of_[param]);
  ready_[param] = true;
  auto slot = state.full_grad.narrow(0, unit.offsets[slot_of_[param]], params_[param].tensor.numel());
  if (!grad.defined()) {
    slot.zero_();  // a member without a gradient contributes nothing
    return;
  }
  // Sum of (g / world) over every rank = the mean; under HYBRID_SHARD_ZERO2 the sum is finished
  // by the all-reduce across machines. Divided here, while the gradient is in cache.
  // One pass over memory: the copy divides.
  auto destination = slot.view(grad.sizes());
  at::div_out(destination, grad, world_divisor_);
}

void ShardedReducer::launch_ready_units() {
  // Units are launched strictly in index order so that every rank issues the same sequence of
  // collectives, whatever order its hooks fire in.
  while (next_to_launch_ < units_.size() && state_[next_to_launch_].pending == 0) {
    auto& state = state_[next_to_launch_];
    // The optimizer's zero_grad() (set_to_none) drops the pieces' .grad: then this backward's
    // gradient replaces the shard; otherwise it adds to it, as backward adds to .grad.
    state.accumulate = false;
    for (size_t i : units_[next_to_launch_].members) {
      state.accumulate = state.accumulate || (pieces_[i].defined() && pieces_[i].grad().defined());
    }
    if (!state.grad_shard.defined()) {
      // Allocated by the first backward, so that prepare holds nothing but the parameters.
      const auto options = state.full_grad.options();
      const int64_t numel = units_[next_to_launch_].shard_numel;
      state.grad_shard = offload_ ? at::empty({numel}, options.device(at::kCPU).pinned_memory(options.device().is_cuda()))
                                  : at::empty({numel}, options);
    }
    state.reduced = state.accumulate || offload_
                        ? at::empty({units_[next_to_launch_].shard_numel}, state.full_grad.options())
                        : state.grad_shard;
    state.work = shard_group_.reduce_scatter_flat(state.reduced, state.full_grad);
    ++next_to_launch_;
  }
}

void ShardedReducer::release_sent_gradients() {
  for (size_t u = 0; u < next_to_launch_; ++u) {
    auto& state = state_[u];
    if (state.full_grad.defined() && state.work && state.work->isCompleted()) release_buffer(u);
  }
}

void ShardedReducer::wait_all(bool rethrow) {
  for (size_t u = 0; u < units_.size(); ++u) {
    auto& state = state_[u];
    if (!state.work) continue;
    auto work = std::move(state.work);
    try {
      shard_group_.wait(work, "FSDP gradient reduce-scatter (unit " + std::to_string(u + 1) +
                                  " of " + std::to_string(units_.size()) + ")",
                        shard_group_.timeout_for(units_[u].flat));
    } catch (...) {
      if (rethrow) throw;
    }
    release_buffer(u);
  }
}

void ShardedReducer::finish_backward() {
  try {
    // Parameters this backward did not reach: what no_sync passes left in .grad, else zeros
    // (torch FSDP also tolerates unused parameters).
    for (size_t i = 0; i < params_.size(); ++i) {
      if (ready_[i]) continue;
      auto& tensor = params_[i].tensor;
      store_gradient(i, tensor.grad());
      tensor.mutable_grad() = at::Tensor();
      if (--state_[unit_of_[i]].pending == 0) launch_ready_units();
    }
    units_done_at_end();
    wait_all(/*rethrow=*/true);
    if (replica_group_ != nullptr) {
      // HYBRID_SHARD_ZERO2: each machine reduced its own batches; the same shard on the other
      // machines holds theirs.
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (auto& state : state_) {
        std::vector<at::Tensor> tensors{state.reduced};
        c10d::AllreduceOptions options;
        options.timeout = replica_group_->timeout_for(state.reduced);
        works.push_back(replica_group_->launched(
            replica_group_->backend_for(state.reduced).allreduce(tensors, options)));
      }
      for (auto& work : works) {
        replica_group_->wait(work, "FSDP gradient all-reduce across machines",
                             replica_group_->timeout_for(state_.front().reduced));
      }
    }
    write_shards();
  } catch (...) {
    wait_all(/*rethrow=*/false);
    units_done_at_end();
    reset();
    throw;
  }
  reset();
}

void ShardedReducer::write_shards() {
  c10::NoGradGuard no_grad;
  for (size_t u = 0; u < units_.size(); ++u) {
    const auto& unit = units_[u];
    auto& state = state_[u];
    if (offload_) {
      if (state.accumulate) {
        state.grad_shard.add_(state.reduced.to(at::kCPU));
      } else {
        state.grad_shard.copy_(state.reduced);
      }
    } else if (state.accumulate) {
      state.grad_shard.add_(state.reduced);
    }
    state.reduced.reset();
    for (size_t j = 0; j < unit.members.size(); ++j) {
      const size_t i = unit.members[j];
      if (!pieces_[i].defined()) continue;
      auto [begin, end] = unit.local_range(j, params_[i].tensor.numel());
      // Aliases the shard's storage without being an autograd view: libtorch's zero_grad()
      // detaches every .grad in place, which views refuse.
      pieces_[i].mutable_grad() = at::empty({0}, state.grad_shard.options())
                                      .set_(state.grad_shard.storage(),
                                            state.grad_shard.storage_offset() + begin - unit.shard_offset,
                                            {end - begin}, {1});
    }
  }
}

void ShardedReducer::reset() {
  std::fill(ready_.begin(), ready_.end(), false);
  for (size_t u = 0; u < units_.size(); ++u) {
    state_[u].pending = units_[u].members.size();
    release_buffer(u);
    state_[u].reduced.reset();
  }
  next_to_launch_ = 0;
}

void ShardedReducer::all_gather_parameters() {
  for (size_t u = 0; u < units_.size(); ++u) launch_parameter_gather(u);
  wait_parameter_gathers();
}

void ShardedReducer::launch_parameter_gather(size_t u) {
  c10::NoGradGuard no_grad;
  if (shard_at_rest_ && !whole_at_rest_[u]) {
    release(u);
    return;
  }
  wait_prefetch(u);
  allocate_and_launch_gather(u);
}

void ShardedReducer::allocate_and_launch_gather(size_t u) {
  c10::NoGradGuard no_grad;
  auto& unit = units_[u];
  if (!gathered_[u]) {
    // The released storage comes back: same StorageImpl, so every parameter view sees it.
    auto* storage = unit.flat.storage().unsafeGetStorageImpl();
    const auto bytes = static_cast<size_t>(unit.flat.numel()) * unit.flat.element_size();
    storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
    storage->set_nbytes(bytes);
    gathered_[u] = true;
  }
  if (masters_[u].defined()) unit.shard().copy_(masters_[u]);
  gathers_.push_back({u, shard_group_.all_gather_flat(unit.flat)});
}

void ShardedReducer::prefetch(size_t u) {
  if (gathered_[u]) return;  // whole, or already on its way
  allocate_and_launch_gather(u);
  prefetches_[u] = std::move(gathers_.back().work);
  gathers_.pop_back();
}

void ShardedReducer::wait_prefetch(size_t u) {
  if (!prefetches_[u]) return;
  auto work = std::move(prefetches_[u]);
  prefetches_[u].reset();
  shard_group_.wait(work, "FSDP parameter prefetch (unit " + std::to_string(u + 1) + " of " +
                              std::to_string(units_.size()) + ")",
                    shard_group_.timeout_for(units_[u].flat));
}

void ShardedReducer::release(size_t u) {
  if (!shard_at_rest_ || !gathered_[u]) return;
  wait_prefetch(u);  // never free storage an all-gather still writes
  auto* storage = units_[u].flat.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, units_[u].flat.device()));
  storage->set_nbytes(0);
  gathered_[u] = false;
}

void ShardedReducer::gather(size_t u) {
  wait_prefetch(u);
  if (gathered_[u]) return;
  allocate_and_launch_gather(u);
  wait_parameter_gathers();
}

void ShardedReducer::parameters_changed() {
  c10::NoGradGuard no_grad;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (masters_[u].defined() && gathered_[u]) masters_[u].copy_(units_[u].shard());
  }
}

void ShardedReducer::wait_parameter_gathers() {
  auto gathers = std::move(gathers_);
  gathers_.clear();
  for (const auto& gather : gathers) {
    shard_group_.wait(gather.work, "FSDP parameter all-gather (unit " + std::to_string(gather.unit + 1) + " of " +
                                       std::to_string(units_.size()) + ")",
                      shard_group_.timeout_for(units_[gather.unit].flat));
  }
}

}  // namespace acc::detail
