#include "loop.h"

int main() {
  torch::Tensor loss;
  train_loop(loss);
}
