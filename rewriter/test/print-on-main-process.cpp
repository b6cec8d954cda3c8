// RUN: %acc-migrate --rules=default,+print-on-main-process %s -- %stub-flags 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
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
    // REPORT: print-on-main-process.cpp:[[@LINE-1]]:5: print-in-loop: {{.*}}guard it
  }
}
