// The Accelerator's side of prepared data loaders: what a loader needs from it, and what
// gather_for_metrics drops at the end of the data.
#include <acc/accelerator.h>

#include "optim/gradient_state.h"

namespace acc {

detail::LoaderContext Accelerator::loader_context() const {
  detail::LoaderContext context;
  if (options_.device_placement()) context.device = device();
  // Host-to-GPU copies of batches overlap compute: pinned staging, non-blocking copy.
  context.non_blocking = device().is_cuda();
  context.gradient_state = gradient_state_;
  context.shard.num_processes = num_processes();
  context.shard.process_index = process_index();
  context.shard.split_batches = options_.split_batches();
  context.shard.even_batches = options_.even_batches();
  return context;
}

int64_t Accelerator::samples_to_keep_for_metrics() const {
  const auto& state = *gradient_state_;
  if (!state.end_of_dataloader() || state.remainder() <= 0) return -1;
  return state.remainder();
}

}  // namespace acc
