// RUN: %acc-migrate --rules=optimizer-declaration %s | FileCheck %s
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {};

torch::optim::Adam make_optimizer(NetImpl &net) { return torch::optim::Adam(net.parameters()); }
// CHECK: {{^}}+acc::Optimizer<torch::optim::Adam> make_optimizer(NetImpl &net) { return acc::Optimizer<torch::optim::Adam>(net.parameters()); }

void use(torch::optim::Optimizer &opt, torch::optim::Adam &adam) {}  // references: unchanged
// CHECK-NOT: {{^}}-void use

struct Trainer {
  torch::optim::SGD sgd;
  // CHECK: {{^}}+  acc::Optimizer<torch::optim::SGD> sgd;
};

int main() {
  NetImpl net;
  torch::optim::Adam plain(net.parameters(), torch::optim::AdamOptions(1e-3));
  // CHECK: {{^}}+  acc::Optimizer<torch::optim::Adam> plain(net.parameters(), torch::optim::AdamOptions(1e-3));
  auto shared = std::make_shared<torch::optim::Adam>(net.parameters());
  // CHECK: {{^}}+  auto shared = std::make_shared<acc::Optimizer<torch::optim::Adam>>(net.parameters());
  auto unique = std::make_unique<torch::optim::SGD>(net.parameters(), 0.1);
  // CHECK: {{^}}+  auto unique = std::make_unique<acc::Optimizer<torch::optim::SGD>>(net.parameters(), 0.1);
  torch::optim::Optimizer *raw = new torch::optim::Adam(net.parameters());
  // CHECK: {{^}}+  torch::optim::Optimizer *raw = new acc::Optimizer<torch::optim::Adam>(net.parameters());
  using namespace torch::optim;
  Adam short_name(net.parameters());
  // CHECK: {{^}}+  acc::Optimizer<Adam> short_name(net.parameters());

}
