#pragma once
// FULL_SHARD on the forward seam: each unit's flat buffers are gathered before the unit's forward
// and released after it, gathered again before the backward of what it computed, and released
// once backward has produced all of their gradients. A unit whose forward never ran the seam
// cannot be released safely (nothing would gather it in time), so it stays whole like
// SHARD_GRAD_OP's parameters; the first forward tells which units run it.
#include <torch/nn/module.h>

#include <string>
#include <vector>

#include <acc/hooks.h>

#include <acc/fsdp.h>

#include "fsdp/wrap_policy.h"

namespace acc::detail {

class ShardedReducer;

class FullShardUnits {
 public:
  /// `units` as select_units returned them; the reducer's flat units were built from the same
  /// groups, in the same order. The root unit (the model itself) is not released after a forward
  /// that built a graph (its backward starts at once), as in torch.
  /// `activation_checkpointing`: units a Sequential calls run under acc::checkpoint; the others
  /// are named in a note (their callers are the user's code).
  FullShardUnits(torch::nn::Module& model, ShardedReducer& reducer, std::vector<UnitModule> units,
                 const ResolvedFsdpPlugin& plugin);
  ~FullShardUnits();
  FullShardUnits(const FullShardUnits&) = delete;
  FullShardUnits& operator=(const FullShardUnits&) = delete;

  /// The units, and which ran the seam so far.
  const std::vector<UnitModule>& units() const { return units_; }
  bool runs_seam(size_t unit) const { return seen_[unit]; }

  /// After the first optimizer step: units other than the root whose forward has not run the seam
  /// stay whole for good, so sharding saves nothing for them. Names them once per unit type, with
  /// the fix, as a warning or (`as_error`, require_unit_seams) a ConfigError. Later calls do nothing.
  void check_seams_once(bool as_error);

 private:
  void before_forward(size_t unit);
  void after_forward(size_t unit);
  void before_backward(size_t unit);
  void after_unit_gradients(size_t unit);
  void prefetch(size_t unit);
  void gather(size_t unit);
  void release(size_t unit);

  ShardedReducer& reducer_;
  std::vector<UnitModule> units_;
  std::vector<std::vector<size_t>> flats_;  // per unit: the reducer's flat units
  std::vector<bool> seen_;
  bool seams_checked_ = false;
  bool reshard_after_forward_;
  BackwardPrefetch backward_prefetch_;
  bool forward_prefetch_;
  std::vector<HookHandle> handles_;
  // The order of this step's training forward calls, by start (forward prefetch uses the previous
  // step's) and by end (backward runs them in reverse). Every rank runs the same program, so every
  // rank prefetches the same units in the same order, as collectives require.
  std::vector<size_t> starts_, previous_starts_, ends_;
  bool backward_started_ = false;
  size_t cursor_ = 0;                     // backward's position in ends_
  std::vector<size_t> next_in_backward_;  // per unit: the unit to prefetch after it (BACKWARD_POST)
};

}  // namespace acc::detail
