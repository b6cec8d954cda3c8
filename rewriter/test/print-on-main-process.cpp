// print-on-main-process rewrites prints in training loops: loops of functions that use the
// accelerator (the fact accelerator-users, produced by the rules that write `accelerator.`). Alone,
// no function uses one, so nothing changes:
// RUN: %acc-migrate --rules=print-on-main-process %s -- %stub-flags 2>&1 | sed '/^acc-migrate: /d' | FileCheck --allow-empty --check-prefix=ALONE %s
// ALONE-NOT: accelerator
// With backward, train() uses the accelerator:
// RUN: %acc-migrate --rules=backward,print-on-main-process %s -- %stub-flags 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
// What it cannot rewrite it leaves to print-in-loop (print-in-loop.cpp); it reports nothing itself.
// REPORT-NOT: print-on-main-process:
#include <torch/torch.h>
#include <cstdio>

void train(torch::Tensor loss) {
  for (int step = 0; step < 3; ++step) {
    loss.backward();
    std::cout << "step " << step << " loss " << loss.item<float>() << std::endl;
    // CHECK: {{^}}+    accelerator.print("step ", step, " loss ", loss.item<float>());
    std::cout << "epoch done" << '\n';
    // CHECK: {{^}}+    accelerator.print("epoch done");
    std::printf("step %d\n", step);
    // CHECK: {{^}}+    if (accelerator.is_local_main_process()) std::printf("step %d\n", step);
    std::cout << "no newline";
    // CHECK-NOT: {{^}}+{{.*}}no newline
  }
}
