#include "train.h"

int main() {
  torch::Tensor loss;
  train(loss, 2);
}
