// RUN: %acc-migrate --rules=device-declaration %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
#include <torch/torch.h>

torch::Device global_device(torch::kCUDA);
// REPORT: device-declaration.cpp:[[@LINE-1]]:15: device-declaration: `global_device` is a device fixed before the accelerator exists; make it a local

struct Options {
  torch::Device device = torch::kCPU;
};
struct Config {
  torch::Device where = torch::kCPU;
};
// REPORT: device-declaration.cpp:[[@LINE-2]]:17: device-declaration: `Config::where` holds a device

int main() {
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  // CHECK: {{^}}-  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  // CHECK-NEXT: {{^}}+  acc::Accelerator accelerator;
  // CHECK-NEXT: {{^}}+  torch::Device device = accelerator.device();
  torch::DeviceType type = torch::kCUDA;
  torch::Device from_type(type);
  // CHECK: {{^}}+  torch::Device from_type = accelerator.device();
  auto spelled = torch::Device(torch::kCUDA);
  // CHECK: {{^}}+  auto spelled = accelerator.device();
  torch::Device cpu(torch::kCPU);  // exporting: stays on the CPU
  // CHECK-NOT: {{^}}-  torch::Device cpu
  Options options;
  options.device = torch::Device(torch::kCUDA);
  // CHECK: {{^}}+  options.device = accelerator.device();
}
