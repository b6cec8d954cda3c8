// print-in-loop reports prints in training loops: loops of functions that use the accelerator (the
// fact accelerator-users, produced by the rules that write `accelerator.`). Alone, no function uses
// one, so there is nothing to report:
// RUN: %acc-migrate --rules=print-in-loop %s -- %stub-flags 2>&1 | FileCheck --check-prefix=ALONE %s
// ALONE-NOT: print-in-loop:
// With backward, train() uses the accelerator:
// RUN: %acc-migrate --rules=backward,print-in-loop %s -- %stub-flags 2>%t.err | FileCheck --allow-empty --check-prefix=DIFF %s
// RUN: FileCheck %s < %t.err
// With print-on-main-process too (the fact rewritten-prints), what it rewrote is not reported and what
// it cannot rewrite still is:
// RUN: %acc-migrate --rules=backward,print-on-main-process,print-in-loop %s -- %stub-flags 2>&1 >/dev/null | FileCheck --check-prefix=REWRITTEN %s
#include <torch/torch.h>
#include <cstdio>

void train(torch::Tensor loss) {
  for (int step = 0; step < 3; ++step) {
    loss.backward();
    std::cout << "step " << step << " loss " << loss.item<float>() << std::endl;
    // CHECK: print-in-loop.cpp:[[@LINE-1]]:5: print-in-loop: std::cout in the training loop prints on every process; print once, on the main process: `accelerator.print("step ", step, " loss ", loss.item<float>());`
    // REWRITTEN-NOT: print-in-loop.cpp:[[@LINE-2]]
    std::printf("step %d\n", step);
    // CHECK: print-in-loop.cpp:[[@LINE-1]]:5: print-in-loop: printf in the training loop prints on every process
    // REWRITTEN-NOT: print-in-loop.cpp:[[@LINE-2]]
    std::cout << "no newline";
    // CHECK: print-in-loop.cpp:[[@LINE-1]]:5: print-in-loop: {{.*}}; guard it: `if (accelerator.is_local_main_process())`
    // REWRITTEN: print-in-loop.cpp:[[@LINE-2]]:5: print-in-loop: {{.*}}guard it
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
