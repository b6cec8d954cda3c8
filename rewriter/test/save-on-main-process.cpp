// RUN: %acc-migrate --rules=save-on-main-process %s -- %stub-flags 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
#include <torch/torch.h>

void train(torch::nn::Linear &model) {
  for (int epoch = 0; epoch < 2; ++epoch) {
    torch::save(model, "checkpoint.pt");
    // CHECK: {{^}}-    torch::save(model, "checkpoint.pt");
    // CHECK-NEXT: {{^}}+    accelerator.wait_for_everyone();
    // CHECK-NEXT: {{^}}+    if (accelerator.is_main_process()) torch::save(model, "checkpoint.pt");
  }
  if (true) torch::save(model, "last.pt");
  // REPORT: save-on-main-process.cpp:[[@LINE-1]]:13: save-on-main-process: torch::save runs on every process
  // REPORT-SAME: `accelerator.wait_for_everyone(); if (accelerator.is_main_process()) torch::save(model, "last.pt");`
}
