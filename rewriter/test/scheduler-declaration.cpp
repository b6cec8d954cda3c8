// RUN: %acc-migrate --rules=scheduler-declaration %s -- %stub-flags | FileCheck %s
#include <torch/torch.h>

void train(torch::optim::Adam &opt) {
  torch::optim::StepLR scheduler(opt, /*step_size=*/30, 0.1);
  // CHECK: {{^}}+  acc::Scheduler<torch::optim::StepLR> scheduler(opt, /*step_size=*/30, 0.1);
  auto owned = std::make_unique<torch::optim::StepLR>(opt, 10);
  // CHECK: {{^}}+  auto owned = std::make_unique<acc::Scheduler<torch::optim::StepLR>>(opt, 10);
  torch::optim::LRScheduler &base = scheduler;  // a reference: unchanged
  // CHECK-NOT: {{^}}{{[-+]}}{{.*}}LRScheduler &base
}
