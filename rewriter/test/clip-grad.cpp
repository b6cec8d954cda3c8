// RUN: %acc-migrate --rules=clip-grad %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
#include <torch/torch.h>

// libtorch's overloads (torch/nn/utils/clip_grad.h): a vector, a braced list, one tensor; norm_type
// and error_if_nonfinite defaulted. acc's take the vector (and norm_type).
void step(torch::nn::Linear &model) {
  torch::nn::utils::clip_grad_norm_(model->parameters(), 0.5);
  // CHECK: {{^}}+  accelerator.clip_grad_norm_(model->parameters(), 0.5);
  torch::nn::utils::clip_grad_value_(model->parameters(), 1.0);
  // CHECK: {{^}}+  accelerator.clip_grad_value_(model->parameters(), 1.0);
  torch::nn::utils::clip_grad_norm_(model->parameters(), 0.5, /*norm_type=*/1.0);
  // CHECK: {{^}}+  accelerator.clip_grad_norm_(model->parameters(), 0.5, /*norm_type=*/1.0);
  torch::nn::utils::clip_grad_norm_({model->weight, model->bias}, 0.5);
  // CHECK: {{^}}+  accelerator.clip_grad_norm_({model->weight, model->bias}, 0.5);
  torch::nn::utils::clip_grad_value_(model->weight, 1.0);
  // CHECK: {{^}}+  accelerator.clip_grad_value_({model->weight}, 1.0);
  double norm = torch::nn::utils::clip_grad_norm_(model->weight, 0.5);
  // CHECK: {{^}}+  double norm = accelerator.clip_grad_norm_({model->weight}, 0.5);
  torch::nn::utils::clip_grad_norm_(model->parameters(), 0.5, 2.0, /*error_if_nonfinite=*/true);
  // REPORT: clip-grad.cpp:[[@LINE-1]]:3: clip-grad: `clip_grad_norm_` with error_if_nonfinite: acc's clip_grad_norm_ has no such argument; write `double norm = accelerator.clip_grad_norm_(model->parameters(), 0.5, 2.0);` and check `std::isfinite(norm)` yourself
  // CHECK-NOT: {{^}}-{{.*}}error_if_nonfinite
}
