// RUN: %acc-migrate %s -- %stub-flags | FileCheck %s
// The include goes after the last include of the file's leading block, once.
#include <torch/torch.h>
#include <vector>
// CHECK: {{^}} #include <vector>
// CHECK-NEXT: {{^}}+#include <acc/acc.h>
// CHECK-NOT: {{^}}+#include <acc/acc.h>

void a(torch::Tensor loss) { loss.backward(); }
void b(torch::Tensor loss) { loss.backward(); }
