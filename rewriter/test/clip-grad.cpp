// RUN: %acc-migrate --rules=clip-grad %s -- %stub-flags | FileCheck %s
#include <torch/torch.h>

void step(torch::nn::Linear &model) {
  torch::nn::utils::clip_grad_norm_(model->parameters(), 0.5);
  // CHECK: {{^}}+  accelerator.clip_grad_norm_(model->parameters(), 0.5);
  torch::nn::utils::clip_grad_value_(model->parameters(), 1.0);
  // CHECK: {{^}}+  accelerator.clip_grad_value_(model->parameters(), 1.0);
}
