#include <torch/torch.h>

void fit(torch::Tensor loss) {
  for (int step = 0; step < 3; ++step) loss.backward();
}
