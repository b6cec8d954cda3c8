#pragma once
// What every strategy's prepare does to a model on several processes: check that every rank built
// the same model and make rank 0's weights everyone's.
#include <torch/nn/module.h>

#include <string>
#include <vector>

namespace acc::detail {

class ProcessGroup;

/// Throws DistributedError on every rank, naming the first parameter or buffer whose name, shape
/// or dtype differs between ranks.
void check_models_agree(ProcessGroup& group, const torch::nn::Module& model);
/// Collective when `group` is given. `first_meta`: this rank's first_meta_tensor(model). Returns
/// whether some rank built the model empty (acc::init_empty_weights); those ranks receive rank 0's
/// values when `from_rank0`. Throws ConfigError on every rank, naming the rank, the tensor and the
/// fix, when rank 0 (or a single process) has no values to give, or when nothing fills a rank's.
bool check_empty_weights(ProcessGroup* group, const std::string& first_meta, bool from_rank0);
/// Copies rank 0's parameters and buffers to every rank; parameters that require grad only when
/// `trainable` (FSDP fills those unit by unit).
void broadcast_model_state(ProcessGroup& group, torch::nn::Module& model, bool trainable = true);
/// Broadcasts `tensors` from `root` in one message per dtype (coalesced), in place.
void broadcast_coalesced(ProcessGroup& group, const std::vector<at::Tensor>& tensors, int root,
                         const std::string& what);

}  // namespace acc::detail
