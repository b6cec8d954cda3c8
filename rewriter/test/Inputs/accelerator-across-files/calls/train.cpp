#include "train.h"

void train_epoch(torch::Tensor loss) {
  for (int step = 0; step < 3; ++step) loss.backward();
}

void train(torch::Tensor loss, int epochs) {
  for (int epoch = 0; epoch < epochs; ++epoch) train_epoch(loss);
}
