// RUN: %acc-migrate %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
// Bodies of functions outside the project are skipped while parsing; a body that a library's macro
// writes into the project is still the project's, and is analysed.
#include <torch/torch.h>
#include "Inputs/trainlib/step.h"

DEFINE_STEP(step)
// REPORT: function-bodies.cpp:[[@LINE-1]]:1: backward: inside a macro expansion, which acc-migrate never edits; change it by hand to `accelerator.backward(loss)`

void train(torch::Tensor loss) {
  loss.backward();
  // CHECK: {{^}}+  accelerator.backward(loss);
}
