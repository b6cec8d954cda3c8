#include "model.h"

RegressorImpl::RegressorImpl()
    : hidden(register_module("hidden", torch::nn::Linear(4, 16))), out(register_module("out", torch::nn::Linear(16, 1))) {}

torch::Tensor RegressorImpl::forward(torch::Tensor x) { return out(torch::relu(hidden(x))); }
