#pragma once
#include <torch/torch.h>

// A template no source of the scope instantiates: its backward cannot be typed, so it is not migrated.
template <typename Model>
void fine_tune(Model &model, torch::Tensor data) {
  for (int step = 0; step < 3; ++step) model.forward(data).backward();
}
