// RUN: %acc-migrate --rules=backward %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
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
  // libtorch's fourth argument, `inputs`, which accelerator.backward has not: reported.
  loss.backward({}, std::nullopt, false, std::vector<torch::Tensor>{w});
  // REPORT: backward.cpp:[[@LINE-1]]:3: backward: `backward` with `inputs`: accelerator.backward has no such argument; write `accelerator.backward(loss, {}, std::nullopt, false);`: every parameter gets its gradient, as DDP's synchronisation needs
  // CHECK-NOT: {{^}}-{{.*}}std::vector<torch::Tensor>{w}
}
