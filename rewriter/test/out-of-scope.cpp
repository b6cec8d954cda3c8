// RUN: %acc-migrate --rules=out-of-scope %s 2>&1 >/dev/null | FileCheck %s
// A run over code whose training lives out of reach is not a silent "0 edits": a project header
// outside the scope is named (the training template in include/trainer.h), and so is a training
// template no source of the scope instantiates (src/uncalled.h; tune.cpp includes it).
// RUN: %acc-migrate %S/Inputs/out-of-scope/src -- -I %S/Inputs/out-of-scope/include 2>&1 >/dev/null | FileCheck --check-prefix=DIR %s
// DIR: main.cpp:1:10: out-of-scope: project header `{{.*}}Inputs/out-of-scope/include/trainer.h` is outside the scope: its training code is not migrated; widen the scope to include it (e.g. `acc-migrate {{.*}}Inputs/out-of-scope/include ...`, or their common directory)
// DIR: uncalled.h:7:40: out-of-scope: `backward` in `fine_tune` was not migrated: no source of the scope trains through it; widen the scope to the sources that call `fine_tune` (a template is migrated where it is instantiated), or write `accelerator.backward(loss)` by hand
// DIR: 0 file(s) changed (0 edit(s)), 2 of 2 source(s) parsed, 0 failed; 2 finding(s) to review
#include <torch/torch.h>

template <typename Model>
void fine_tune(Model &model, torch::Tensor data) {
  for (int step = 0; step < 3; ++step) model.forward(data).backward();
  // CHECK: out-of-scope.cpp:[[@LINE-1]]:40: out-of-scope: `backward` in `fine_tune` was not migrated
}

// A concrete backward is migrated by the backward rule, which this run does not select: reported too.
void train(torch::Tensor loss) { loss.backward(); }
// CHECK: out-of-scope.cpp:[[@LINE-1]]:34: out-of-scope: `backward` in `train` was not migrated
