#include <torch/torch.h>
void train(torch::Tensor loss) {
  loss.backward();
}
