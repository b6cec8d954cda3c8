#pragma once
// Whether this process holds PartialState's process-wide state, for callers that must not copy it
// into another process (acc::launch forks ranks, which would inherit it). Torch-free.
namespace acc::detail {

/// True from the first Accelerator or PartialState of this process until PartialState::destroy()
/// (the state outlives the objects that created it).
bool partial_state_exists();

}  // namespace acc::detail
