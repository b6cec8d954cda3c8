// RUN: %acc-migrate %s -- %stub-flags 2>%t.err | FileCheck --allow-empty --check-prefix=DIFF %s
// RUN: FileCheck %s < %t.err
#include <torch/torch.h>
#include <cstdio>

void train(torch::Tensor loss) {
  for (int step = 0; step < 3; ++step) {
    loss.backward();
    std::cout << "step " << step << " loss " << loss.item<float>() << std::endl;
    // CHECK: print-in-loop.cpp:[[@LINE-1]]:5: print-in-loop: std::cout in the training loop prints on every process; print once, on the main process: `accelerator.print("step ", step, " loss ", loss.item<float>());`
    std::printf("step %d\n", step);
    // CHECK: print-in-loop.cpp:[[@LINE-1]]:5: print-in-loop: printf in the training loop prints on every process
    std::cout << "no newline";
    // CHECK: print-in-loop.cpp:[[@LINE-1]]:5: print-in-loop: {{.*}}; guard it: `if (accelerator.is_local_main_process())`
  }
  std::cout << "done" << std::endl;  // outside the loop: once per process is what the user sees anyway
  // CHECK-NOT: print-in-loop.cpp:[[@LINE-1]]
}

void helper() {
  for (int i = 0; i < 2; ++i) std::cout << i << std::endl;  // no accelerator here: not a training loop
  // CHECK-NOT: print-in-loop.cpp:[[@LINE-1]]
}
// The report changes nothing by itself.
// DIFF-NOT: {{^}}+{{.*}}accelerator.print(
