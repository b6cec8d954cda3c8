// include-acc is a finalizer: it always runs, on the fact files-using-acc, here produced by backward
// (the only rule this test selects).
// RUN: %acc-migrate --rules=backward %s -- %stub-flags | FileCheck %s
// The include goes after the last include of the file's leading block, once.
#include <torch/torch.h>
#include <vector>
// CHECK: {{^}} #include <vector>
// CHECK-NEXT: {{^}}+#include <acc/acc.h>
// CHECK-NOT: {{^}}+#include <acc/acc.h>

void a(torch::Tensor loss) { loss.backward(); }
void b(torch::Tensor loss) { loss.backward(); }
