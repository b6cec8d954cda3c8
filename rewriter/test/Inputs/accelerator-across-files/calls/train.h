#pragma once
#include <torch/torch.h>

void train_epoch(torch::Tensor loss);
void train(torch::Tensor loss, int epochs);
