#pragma once
// What prepare() does to a model on several processes: check that every rank built the same
// model, make rank 0's weights everyone's, and attach the DDP reducer.
#include <torch/nn/module.h>

#include <memory>

#include <acc/options.h>

namespace acc::detail {

class ProcessGroup;
class Reducer;

/// Throws DistributedError on every rank, naming the first parameter or buffer whose name, shape
/// or dtype differs between ranks.
void check_models_agree(ProcessGroup& group, const torch::nn::Module& model);
/// Copies rank 0's parameters and buffers to every rank.
void broadcast_model_state(ProcessGroup& group, torch::nn::Module& model);
std::unique_ptr<Reducer> make_reducer(ProcessGroup& group, torch::nn::Module& model,
                                      const DistributedDataParallelKwargs& options);

}  // namespace acc::detail
