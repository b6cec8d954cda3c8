#pragma once
// FSDP's gradient path (SHARD_GRAD_OP, HYBRID_SHARD_ZERO2) for a model prepared in place: hooks
// on each parameter's gradient accumulator copy its gradient into its unit's flat buffer and drop
// the full-size .grad; as soon as a unit is complete its averaged gradient is reduce-scattered
// (while the rest of backward runs) into this rank's gradient shard. The optimizer steps the
// shard pieces that local_piece() hands out; all_gather_parameters() then makes every rank's
// parameters full again.
#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ddp/gradient_sync.h"
#include "fsdp/flat_parameter.h"

namespace acc::detail {

class ProcessGroup;

class ShardedReducer : public GradientSync {
 public:
  /// `shard_group` shares each unit (the whole job, or one machine under HYBRID_SHARD_ZERO2);
  /// `replica_group` (null unless hybrid) holds the ranks with the same shard on other machines.
  /// `offload`: the optimizer steps fp32 master shards in CPU memory (pinned when the model is on
  /// CUDA): gradient shards are copied there after the reduce-scatter and the masters back
  /// before the parameter all-gather (FSDP offload_params).
  ShardedReducer(std::vector<NamedTensor> parameters, ProcessGroup& shard_group,
                 ProcessGroup* replica_group, int world_size, double bucket_cap_mb, bool offload);
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
  /// All-gathers every unit's shard into its flat buffer (after the optimizer changed the shards).
  void all_gather_parameters();
  /// The same for one unit, without waiting (units must be launched in the same order on every
  /// rank); wait_parameter_gathers() waits for all launched.
  void launch_parameter_gather(size_t unit);
  void wait_parameter_gathers();
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
    at::Tensor grad_shard;   // what the optimizer's pieces' .grad are views of (CPU under offload)
    c10::intrusive_ptr<c10d::Work> work;
  };
  void on_gradient_ready(size_t param) override;
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
  std::vector<at::Tensor> masters_;  // per unit, offload only: the shard the optimizer steps
  std::vector<at::Tensor> pieces_;  // per parameter; undefined where the shard holds none of it
  std::unordered_map<const void*, size_t> index_of_;       // parameter TensorImpl -> index
  std::unordered_map<const void*, size_t> unit_of_piece_;  // piece TensorImpl -> unit
  std::vector<bool> ready_;
  size_t next_to_launch_ = 0;
};

}  // namespace acc::detail
