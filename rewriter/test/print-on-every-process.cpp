// print-on-every-process reports prints in functions that use the accelerator (the fact
// accelerator-users, produced by the rules that write `accelerator.`) that print-on-main-process did
// not rewrite. Alone, no function uses one, so there is nothing to report:
// RUN: %acc-migrate --rules=print-on-every-process %s 2>&1 | FileCheck --check-prefix=ALONE %s
// ALONE-NOT: print-on-every-process.cpp:{{[0-9]+}}:{{[0-9]+}}: print-on-every-process:
// With backward, train() uses the accelerator; the report names the line to write:
// RUN: %acc-migrate --rules=backward,print-on-every-process %s 2>%t.err | FileCheck --allow-empty --check-prefix=DIFF %s
// RUN: FileCheck %s < %t.err
// With print-on-main-process too (the fact rewritten-prints), what it rewrote is not reported and what
// it cannot rewrite still is:
// RUN: %acc-migrate --rules=backward,print-on-main-process,print-on-every-process %s 2>&1 >/dev/null | FileCheck --check-prefix=REWRITTEN %s
#include <torch/torch.h>

#include <cstdio>
#include <iostream>

void train(torch::Tensor loss) {
  for (int step = 0; step < 3; ++step) {
    loss.backward();
    std::cout << "step " << step << " loss " << loss.item<float>() << std::endl;
    // CHECK: print-on-every-process.cpp:[[@LINE-1]]:5: print-on-every-process: std::cout prints on every process; print once, on the main process: `accelerator.print("step ", step, " loss ", loss.item<float>());`
    // REWRITTEN-NOT: print-on-every-process.cpp:[[@LINE-2]]:{{[0-9]+}}: print-on-every-process:
    std::printf("step %d\n", step);
    // CHECK: print-on-every-process.cpp:[[@LINE-1]]:5: print-on-every-process: printf prints on every process; print on the main process only: `if (accelerator.is_local_main_process()) std::printf("step %d\n", step);`
    // REWRITTEN-NOT: print-on-every-process.cpp:[[@LINE-2]]:{{[0-9]+}}: print-on-every-process:
    std::cout << "no newline";
    // CHECK: print-on-every-process.cpp:[[@LINE-1]]:5: print-on-every-process: std::cout prints on every process; guard it: `if (accelerator.is_local_main_process()) std::cout << "no newline";`
    // REWRITTEN: print-on-every-process.cpp:[[@LINE-2]]:5: print-on-every-process: {{.*}}guard it
    auto log = [&] { std::cout << "in a lambda" << std::endl; };
    // CHECK: print-on-every-process.cpp:[[@LINE-1]]:22: print-on-every-process: std::cout prints on every process; guard it
    // REWRITTEN: print-on-every-process.cpp:[[@LINE-2]]:22: print-on-every-process: {{.*}}guard it
    log();
  }
  std::cout << "done" << std::endl;  // outside the loop too: printed once per process
  // CHECK: print-on-every-process.cpp:[[@LINE-1]]:3: print-on-every-process: std::cout prints on every process; print once, on the main process: `accelerator.print("done");`
}

void helper() {
  for (int i = 0; i < 2; ++i) std::cout << i << std::endl;  // no accelerator here
  // CHECK-NOT: print-on-every-process.cpp:[[@LINE-1]]
}
// The report changes nothing by itself.
// DIFF-NOT: {{^}}+{{.*}}accelerator.print(
