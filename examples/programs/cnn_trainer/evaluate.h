#pragma once
#include "data.h"

struct Evaluation {
  double accuracy;  // correct predictions / samples
  double loss;      // mean negative log-likelihood per sample
};

// Evaluates `model` (log-probabilities out) on `test_set`, in order, `batch_size` samples at a time.
Evaluation evaluate(torch::nn::Sequential &model, Shapes test_set, int64_t batch_size, torch::Device device);
