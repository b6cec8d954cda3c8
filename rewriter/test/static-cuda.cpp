// RUN: %acc-migrate --rules=static-cuda %s -- %stub-flags 2>&1 >/dev/null | FileCheck %s
#include <torch/torch.h>

static const torch::Tensor eps = torch::tensor(1e-16f).to(torch::kCUDA);
// CHECK: static-cuda.cpp:[[@LINE-1]]:28: static-cuda: `eps` is created on CUDA during static initialisation{{.*}}; create it after `acc::Accelerator accelerator;` on `accelerator.device()`
static const torch::Tensor on_cpu = torch::tensor(1.0f);
// CHECK-NOT: static-cuda.cpp:[[@LINE-1]]
const torch::Tensor moved = torch::tensor(2.0f).cuda();
// CHECK: static-cuda.cpp:[[@LINE-1]]:21: static-cuda: `moved`

void local() {
  auto fine = torch::tensor(1.0f).to(torch::kCUDA);  // runs after main starts: device-move's business
  // CHECK-NOT: static-cuda.cpp:[[@LINE-1]]
}
