#pragma once
// The strategy an Accelerator runs with (parallel/parallel_strategy.h).
#include <memory>

#include "parallel/parallel_strategy.h"

namespace acc::detail {

/// Collective on several processes (FSDP's hybrid strategies make process groups).
std::unique_ptr<ParallelStrategy> make_parallel_strategy(const StrategyContext& context);

}  // namespace acc::detail
