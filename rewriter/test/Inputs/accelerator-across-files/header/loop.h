#pragma once
#include <torch/torch.h>

inline void train_loop(torch::Tensor loss) {
  for (int step = 0; step < 3; ++step) loss.backward();
}
