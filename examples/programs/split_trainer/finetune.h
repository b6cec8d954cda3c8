#pragma once
#include <torch/torch.h>

// Trains `model` further on shifted data with its own optimizer and loader; the last epoch's loss.
double finetune(torch::nn::Linear &model, int64_t batch_size, torch::Device device);
