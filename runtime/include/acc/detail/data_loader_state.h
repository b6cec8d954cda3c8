#pragma once
// The state a prepared data loader shares with its Accelerator while it is iterated: the
// GradientState (optim/) keeps a stack of them. Kept apart from data_loader.h so that the
// Accelerator's internals need no torch/data headers.
#include <cstdint>

namespace acc {

/// What a prepared loader tells the Accelerator while it is iterated (Accelerate's
/// DataLoaderStateMixin).
struct DataLoaderState {
  /// True while the loader's last batch of the epoch is being processed.
  bool end_of_dataloader = false;
  /// dataset size % total batch size: the real samples in the last global batch (the rest were
  /// duplicated to even the ranks out); -1 when drop_last or the dataset has no size.
  int64_t remainder = -1;
};

namespace detail {
struct GradientState;
/// Pushes / removes `loader` on the stack of loaders being iterated (innermost last).
void begin_dataloader(GradientState& state, const DataLoaderState* loader);
void end_dataloader(GradientState& state, const DataLoaderState* loader);
}  // namespace detail

}  // namespace acc
