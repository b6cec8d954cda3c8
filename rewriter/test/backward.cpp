// RUN: %acc-migrate --rules=backward %s -- %stub-flags | FileCheck %s
#include <torch/torch.h>

struct Grad { void backward() {} };  // not a tensor: untouched

void train(torch::Tensor x, torch::Tensor w) {
  auto loss = (x * 2.0).sum();
  loss.backward();
  // CHECK: {{^}}-  loss.backward();
  // CHECK-NEXT: {{^}}+  accelerator.backward(loss);
  (loss + loss).backward(/*gradient=*/{}, /*retain_graph=*/true);
  // CHECK: {{^}}-  (loss + loss).backward(/*gradient=*/{}, /*retain_graph=*/true);
  // CHECK-NEXT: {{^}}+  accelerator.backward((loss + loss), /*gradient=*/{}, /*retain_graph=*/true);
  torch::Tensor *p = &loss;
  p->backward();
  // CHECK: {{^}}-  p->backward();
  // CHECK-NEXT: {{^}}+  accelerator.backward(*p);
  Grad g;
  g.backward();
  // CHECK-NOT: {{^}}-  g.backward();
}
