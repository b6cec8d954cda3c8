// RUN: %acc-migrate --rules=cuda-in-factory %s -- %stub-flags 2>&1 >/dev/null | FileCheck %s
#include <torch/torch.h>

torch::Tensor noise(int64_t n) {
  auto a = torch::randn({n, 8}, torch::kCUDA);
  // CHECK: cuda-in-factory.cpp:[[@LINE-1]]:33: cuda-in-factory: hard-coded CUDA device passed to a call: every process would use cuda:0; pass the process's device instead: `accelerator.device()`
  auto options = torch::TensorOptions().device(torch::Device(torch::kCUDA));
  // CHECK: cuda-in-factory.cpp:[[@LINE-1]]:62: cuda-in-factory:
  auto b = torch::zeros({n}, torch::kCPU);
  // CHECK-NOT: cuda-in-factory.cpp:[[@LINE-1]]
  return a.to(torch::kCUDA) + b;  // a move: device-move rewrites it
  // CHECK-NOT: cuda-in-factory.cpp:[[@LINE-1]]
}
