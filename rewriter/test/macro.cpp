// RUN: %acc-migrate %s 2>%t.err | FileCheck --allow-empty %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
// Nothing is edited inside a macro expansion; it is reported instead.
#include <torch/torch.h>
#define STEP(loss) loss.backward()

void train(torch::Tensor loss) {
  STEP(loss);
  // REPORT: macro.cpp:[[@LINE-1]]:3: backward: inside a macro expansion, which acc-migrate never edits; change it by hand to `accelerator.backward(loss)`
}
// CHECK-NOT: {{^}}-  STEP(loss);
