#pragma once
// What acc's own code asks of the forward seam's registry (forward_hooks.cpp). The backward half: the autograd nodes a guarded forward built are found
// from the graph when a backward starts, and get pre-hooks that run their module's backward
// pre-hooks (acc::register_backward_pre_hook). Nodes are matched to forward calls by their
// sequence number, which autograd takes from a per-thread counter as each node is created.
#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace acc::detail {

/// Whether any hook (forward, forward pre, backward pre) is registered for `module`.
bool has_module_hooks(const torch::nn::Module& module);
/// Children acc calls for a Sequential (hook_sequential) run under acc::checkpoint when marked
/// (FSDP activation checkpointing); the mark alone does nothing elsewhere.
void set_checkpointed(const torch::nn::Module& module, bool checkpointed);
bool is_checkpointed(const torch::nn::Module& module);
/// True on this thread while acc::checkpoint recomputes a piece inside backward: forwards then are
/// not a new step's (FULL_SHARD keeps their units whole for the backward that follows at once).
bool recomputing_checkpoint();

/// Before a backward from `root`: hooks every node built inside a recorded forward call (the
/// innermost one when calls nest) and forgets the recorded calls. Cheap when none was recorded.
void attach_backward_pre_hooks(const at::Tensor& root);

}  // namespace acc::detail
