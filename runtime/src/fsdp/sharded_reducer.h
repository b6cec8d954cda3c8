#pragma once
// FSDP's gradient path (SHARD_GRAD_OP, HYBRID_SHARD_ZERO2) for a model prepared in place: hooks
// on each parameter's gradient accumulator copy its gradient into its unit's flat buffer and drop
// the full-size .grad; as soon as a unit is complete its averaged gradient is reduce-scattered
// (while the rest of backward runs) into this rank's gradient shard. The optimizer steps the
// shard pieces that local_piece() hands out; all_gather_parameters() then makes every rank's
// parameters full again.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "parallel/gradient_sync.h"
#include "fsdp/flat_parameter.h"

namespace acc::detail {

class ProcessGroup;

struct ShardedReducerOptions {
  /// Units of about this many MiB, unless `groups` is given.
  double bucket_cap_mb = 25;
  /// The units, as indices into the parameter list (FULL_SHARD: one group per wrapped module);
  /// each is split further by dtype and device. Empty: buckets of bucket_cap_mb.
  std::vector<std::vector<size_t>> groups;
  /// The optimizer steps fp32 master shards in CPU memory (pinned when the model is on CUDA):
  /// gradient shards are copied there after the reduce-scatter and the masters back before the
  /// parameter all-gather (FSDP offload_params).
  bool offload = false;
  /// FULL_SHARD: the shard lives apart from the unit's flat buffer (a master on the device, unless
  /// offloaded), so the full parameters can be released between uses (release/gather).
  bool shard_at_rest = false;
  /// sync_module_states: rank 0 of this group (the whole job) gives each unit its values as the unit
  /// is built, so a rank that built the model empty (meta parameters) receives one unit at a time.
  ProcessGroup* fill_from = nullptr;
  /// Where the units of meta parameters are allocated (the model's device).
  c10::Device device = c10::kCPU;
  /// shard_at_rest, per group: its units are released as soon as they are built (so a rank that
  /// built the model empty never holds it whole); the others start whole.
  std::vector<bool> start_released;
};

class ShardedReducer : public GradientSync {
 public:
  /// `shard_group` shares each unit (the whole job, or one machine under the hybrid strategies);
  /// `replica_group` (null unless hybrid) holds the ranks with the same shard on other machines.
  ShardedReducer(std::vector<NamedTensor> parameters, ProcessGroup& shard_group,
                 ProcessGroup* replica_group, int world_size, ShardedReducerOptions options);
  ~ShardedReducer() override;

  const std::vector<FlatParameter>& units() const { return units_; }
  /// This rank's slice of `param` (a model parameter) as a 1-D view of its unit's flat buffer,
  /// with .grad the matching slice of the gradient shard after each synchronising backward.
  /// Undefined when the shard holds none of it, or when `param` is not this model's.
  /// `found` says whether it is.
  at::Tensor local_piece(const at::Tensor& param, bool* found) const;
  /// True when `tensor` is one of the pieces local_piece() hands out.
  bool is_piece(const at::Tensor& tensor) const { return unit_of_piece(tensor) != kNoUnit; }
  /// The unit of a piece local_piece() handed out; kNoUnit for any other tensor.
  static constexpr size_t kNoUnit = static_cast<size_t>(-1);
  size_t unit_of_piece(const at::Tensor& tensor) const;
  /// The model's trainable parameters, in registration order (units_' members index them).
  const std::vector<NamedTensor>& parameters() const { return params_; }
  /// The index of model parameter `param` in parameters(); nullopt when it is not this model's.
  std::optional<size_t> index_of(const at::Tensor& param) const;
  /// Where this rank's piece of parameter `index` lies in the parameter (flattened): [begin, end),
  /// begin == end when the shard holds none of it.
  std::pair<int64_t, int64_t> piece_range(size_t index) const;
  /// After the optimizer changed the shards: all-gathers every unit's shard into its flat buffer,
  /// or, for a unit released at rest (FULL_SHARD, see set_whole_at_rest), releases it.
  void all_gather_parameters();
  /// The same for one unit, without waiting (units must be launched in the same order on every
  /// rank); wait_parameter_gathers() waits for all launched.
  void launch_parameter_gather(size_t unit);
  void wait_parameter_gathers();

  // FULL_SHARD (shard_at_rest): a unit's full parameters exist only between gather() and
  // release(); its parameters keep their TensorImpls and shapes throughout, and using one while
  // released is torch's error ("data is not allocated"), never stale values.
  bool shards_at_rest() const { return shard_at_rest_; }
  bool is_gathered(size_t unit) const { return gathered_[unit]; }
  /// Frees the unit's full parameters; its shard stays (no collective).
  void release(size_t unit);
  /// Makes the unit's parameters full (collective: every rank gathers the same units in the same
  /// order); nothing to do when they are; waits for a prefetch of it.
  void gather(size_t unit);
  /// Starts gathering the unit without waiting (prefetch); gather() or release() waits for it.
  void prefetch(size_t unit);
  /// Whether the unit is gathered again after an optimizer step (true, the default: parameters
  /// nothing gathers around their use) or released (units whose forward runs the seam).
  void set_whole_at_rest(size_t unit, bool whole) { whole_at_rest_[unit] = whole; }
  bool whole_at_rest(size_t unit) const { return whole_at_rest_[unit]; }
  /// Called (with the reducer's lock held) when every member of a unit has its gradient in a
  /// backward, synchronising or not, and at the end of a backward for the units it did not reach:
  /// FULL_SHARD releases them there.
  void set_on_unit_backward_done(std::function<void(size_t)> callback) { on_unit_done_ = std::move(callback); }
  /// Call after the model's parameters were written in place (a checkpoint loaded): the master
  /// shards of offload are refreshed from them.
  void parameters_changed();
  ProcessGroup& shard_group() { return shard_group_; }

 private:
  struct Unit {
    size_t pending = 0;      // members whose gradient is not in `full_grad` yet this backward
    at::Tensor buffer;       // from the pool: full_grad's storage
    at::Tensor full_grad;    // the members' gradients until the reduce-scatter has read them
    bool accumulate = false; // add to grad_shard (the optimizer did not drop it) instead of replacing it
    at::Tensor reduced;      // this rank's averaged shard: grad_shard itself unless accumulating or offloading
    at::Tensor grad_shard;   // what the optimizer's pieces' .grad are views of (CPU under offload); from the first backward
    c10::intrusive_ptr<c10d::Work> work;
  };
  void on_gradient_ready(size_t param) override;
  void on_gradient_unsynced(size_t param) override;
  void finish_unsynced_backward() override;
  void member_done(size_t param);
  void allocate_and_launch_gather(size_t unit);
  void wait_prefetch(size_t unit);
  void units_done_at_end();
  void store_gradient(size_t param, const at::Tensor& grad);
  void acquire_buffer(size_t unit);
  void release_buffer(size_t unit);
  void launch_ready_units();
  void release_sent_gradients();
  void finish_backward() override;
  void wait_all(bool rethrow);
  void write_shards();
  void reset();

  std::vector<NamedTensor> params_;
  ProcessGroup& shard_group_;
  ProcessGroup* replica_group_;
  int world_size_;
  at::Tensor world_divisor_;  // 0-dim CPU float: gradients are divided as they are copied
  std::vector<FlatParameter> units_;
  std::vector<Unit> state_;
  std::vector<size_t> unit_of_;
  std::vector<size_t> slot_of_;
  /// Full-size gradient buffers whose reduce-scatter finished, reused by the next units: fresh
  /// allocations of this size cost page faults on every step, and holding one per unit would
  /// cost what sharding saves. Holds about as many buffers as are in flight at once.
  std::vector<at::Tensor> free_buffers_;
  struct Gather {
    size_t unit;
    c10::intrusive_ptr<c10d::Work> work;
  };
  std::vector<Gather> gathers_;     // launched, not yet waited for
  bool offload_ = false;
  bool shard_at_rest_ = false;
  std::vector<at::Tensor> masters_;  // per unit, offload or shard_at_rest: the shard the optimizer steps
  std::vector<bool> gathered_;       // per unit: the flat buffer holds (or receives) the full parameters
  std::vector<c10::intrusive_ptr<c10d::Work>> prefetches_;  // per unit: an all-gather not waited for
  std::vector<bool> whole_at_rest_;  // per unit: gathered after a step
  std::vector<size_t> members_done_; // per unit: members with a gradient in this backward
  std::vector<bool> member_seen_;    // per parameter: counted in members_done_ this backward
  std::function<void(size_t)> on_unit_done_;
  std::vector<at::Tensor> pieces_;  // per parameter; undefined where the shard holds none of it
  std::unordered_map<const void*, size_t> index_of_;       // parameter TensorImpl -> index
  std::unordered_map<const void*, size_t> unit_of_piece_;  // piece TensorImpl -> unit
  std::vector<bool> ready_;
  size_t next_to_launch_ = 0;
};

}  // namespace acc::detail
