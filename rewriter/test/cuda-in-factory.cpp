// RUN: %acc-migrate --rules=cuda-in-factory %s 2>&1 >/dev/null | FileCheck %s
#include <torch/torch.h>

torch::Tensor noise(int64_t n) {
  auto a = torch::randn({n, 8}, torch::kCUDA);
  // CHECK: cuda-in-factory.cpp:[[@LINE-1]]:33: cuda-in-factory: hard-coded CUDA device passed to a call: every process would use cuda:0; pass the process's device instead: `accelerator.device()`
  auto options = torch::TensorOptions().device(torch::Device(torch::kCUDA));
  // CHECK: cuda-in-factory.cpp:[[@LINE-1]]:62: cuda-in-factory:
  auto c = torch::ones({n}, torch::Device("cuda:1"));
  // CHECK: cuda-in-factory.cpp:[[@LINE-1]]:43: cuda-in-factory:
  auto d = torch::ones({n}, torch::dtype(torch::kFloat).device(torch::kCUDA));
  // CHECK: cuda-in-factory.cpp:[[@LINE-1]]:64: cuda-in-factory:
  torch::Device named("cuda");  // a device: device-declaration's
  // CHECK-NOT: cuda-in-factory.cpp:[[@LINE-1]]
  auto b = torch::zeros({n}, torch::kCPU);
  // CHECK-NOT: cuda-in-factory.cpp:[[@LINE-1]]
  return a.to(torch::kCUDA) + b;  // a move: device-move rewrites it
  // CHECK-NOT: cuda-in-factory.cpp:[[@LINE-1]]
}
