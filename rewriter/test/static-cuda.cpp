// RUN: %acc-migrate --rules=static-cuda %s 2>&1 >/dev/null | FileCheck %s
#include <torch/torch.h>

static const torch::Tensor eps = torch::tensor(1e-16f).to(torch::kCUDA);
// CHECK: static-cuda.cpp:[[@LINE-1]]:28: static-cuda: `eps` is created on CUDA during static initialisation{{.*}}; create it after `acc::Accelerator accelerator;` on `accelerator.device()`
static const torch::Tensor on_cpu = torch::tensor(1.0f);
// CHECK-NOT: static-cuda.cpp:[[@LINE-1]]
const torch::Tensor moved = torch::tensor(2.0f).cuda();
// CHECK: static-cuda.cpp:[[@LINE-1]]:21: static-cuda: `moved`
static torch::Tensor spelled = torch::zeros({2}, torch::Device("cuda:0"));
// CHECK: static-cuda.cpp:[[@LINE-1]]:22: static-cuda: `spelled`
static torch::Tensor by_options = torch::zeros({2}, torch::device(torch::kCUDA));
// CHECK: static-cuda.cpp:[[@LINE-1]]:22: static-cuda: `by_options`
static const std::string kName = "cuda";  // a string, not a device
// CHECK-NOT: static-cuda.cpp:[[@LINE-1]]

void local() {
  auto fine = torch::tensor(1.0f).to(torch::kCUDA);  // runs after main starts: device-move's business
  // CHECK-NOT: static-cuda.cpp:[[@LINE-1]]
}
