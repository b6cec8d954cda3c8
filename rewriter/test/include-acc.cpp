// include-acc is a finalizer: it always runs, on the fact files-using-acc, here produced by backward
// (the only rule this test selects).
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/train.cpp && cp %S/Inputs/include-acc/* %t/
// RUN: %acc-migrate --rules=backward %t | FileCheck %s
// The include goes right after the last torch include of the file's leading block, once: a project
// header after it (progress.h defines `constexpr` away) must not reach acc's headers.
#include <torch/torch.h>
#include <vector>
#define WITH_PROGRESS  // guarded.h includes progress.h inside `#ifdef WITH_PROGRESS`
#include "guarded.h"
#include "progress.h"
// CHECK-LABEL: +++ {{.*}}guarded.h
// In a header with an include guard, outside the `#ifdef` block:
// CHECK: {{^}} #include <torch/torch.h>
// CHECK-NEXT: {{^}}+#include <acc/acc.h>
// CHECK-NEXT: {{^}} #ifdef WITH_PROGRESS
// CHECK-LABEL: +++ {{.*}}no_torch_include.cpp
// CHECK: {{^}} #include <vector>
// CHECK-NEXT: {{^}}+#include <acc/acc.h>
// CHECK-NEXT: {{^}} #include "model.h"
// CHECK-LABEL: +++ {{.*}}train.cpp
// CHECK: {{^}} #include <torch/torch.h>
// CHECK-NEXT: {{^}}+#include <acc/acc.h>
// CHECK-NEXT: {{^}} #include <vector>
// CHECK-NOT: {{^}}+#include <acc/acc.h>
// The migrated files parse (acc's headers before progress.h): running again changes nothing.
// RUN: %acc-migrate --in-place --rules=backward %t
// RUN: %acc-migrate --rules=backward %t > %t/again.diff
// RUN: not grep . %t/again.diff

void a(torch::Tensor loss) { loss.backward(); }
void b(torch::Tensor loss) { loss.backward(); }
