#include "core/parallel_strategies.h"

#include "ddp/ddp_strategy.h"
#include "fsdp/fsdp_strategy.h"
#include "parallel/local_strategy.h"

namespace acc::detail {

namespace {
// Innermost first: each factory gets the strategy built so far and returns it, a replacement, or a
// wrapper of it (FSDP wraps the strategy that runs what it does not shard). One line per strategy.
constexpr StrategyFactory kStrategies[] = {
    make_local_strategy,  // one process
    make_ddp_strategy,    // several processes
    make_fsdp_strategy,   // use_fsdp
};
}  // namespace

std::unique_ptr<ParallelStrategy> make_parallel_strategy(const StrategyContext& context) {
  std::unique_ptr<ParallelStrategy> strategy;
  for (const auto make : kStrategies) strategy = make(context, std::move(strategy));
  return strategy;
}

}  // namespace acc::detail
