// RUN: %acc-migrate --rules=scheduler-declaration %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=NOTE %s < %t.err
#include <torch/torch.h>

void train(torch::optim::Adam &opt) {
  torch::optim::StepLR scheduler(opt, /*step_size=*/30, 0.1);
  // CHECK: {{^}}+  acc::Scheduler<torch::optim::StepLR> scheduler(opt, /*step_size=*/30, 0.1);
  auto owned = std::make_unique<torch::optim::StepLR>(opt, 10);
  // CHECK: {{^}}+  auto owned = std::make_unique<acc::Scheduler<torch::optim::StepLR>>(opt, 10);
  torch::optim::LRScheduler &base = scheduler;  // a reference: unchanged
  // CHECK-NOT: {{^}}{{[-+]}}{{.*}}LRScheduler &base
  // libtorch declares ReduceLROnPlateauScheduler apart from LRScheduler (no base, step(metric)).
  torch::optim::ReduceLROnPlateauScheduler plateau(opt, torch::optim::ReduceLROnPlateauScheduler::min, 0.5);
  // CHECK: {{^}}+  acc::Scheduler<torch::optim::ReduceLROnPlateauScheduler> plateau(opt, torch::optim::ReduceLROnPlateauScheduler::min, 0.5);
}

// A plateau scheduler steps with the validation loss once per epoch, outside the optimizer's loop: the
// accelerator must step it once per call (scheduler-declaration-per-epoch.cpp tests the option).
void fit(torch::nn::Linear &model, torch::optim::SGD &sgd, torch::optim::ReduceLROnPlateauScheduler &plateau) {
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (int i = 0; i < 4; ++i) sgd.step();
    plateau.step(model->forward(torch::ones({1, 4})).sum().item<float>());
    // NOTE: scheduler-declaration.cpp:[[@LINE-1]]:13: scheduler-declaration: this scheduler steps outside the loop of the optimizer's step
  }
}
