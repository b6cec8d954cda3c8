// A scheduler stepped once per epoch (outside the loop of the optimizer's step) must step once per
// call, not once per process: the accelerator is created with step_scheduler_with_optimizer(false).
// scheduler-declaration produces that option (the fact accelerator-options); the create-accelerator
// finalizer writes it into the accelerator of each function that uses one (accelerator-users: here
// main, through backward's edit).
// RUN: %acc-migrate --rules=scheduler-declaration,backward %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=NOTE %s < %t.err
// Stepped with the optimizer (inside its loop): Accelerate's default stays.
// (A copy that defines PER_BATCH: a -D after `--` would need a precompiled torch of its own.)
// RUN: rm -rf %t && mkdir -p %t && echo '#define PER_BATCH' > %t/per-batch.cpp && cat %s >> %t/per-batch.cpp
// RUN: %acc-migrate --rules=scheduler-declaration,backward %t/per-batch.cpp | FileCheck --check-prefix=PER-BATCH %s
// Alone: the note, and no accelerator (nothing uses one).
// RUN: %acc-migrate --rules=scheduler-declaration %s 2>&1 | FileCheck --check-prefixes=ALONE,NOTE %s
// ALONE-NOT: {{^}}+{{.*}}acc::Accelerator accelerator
#include <torch/torch.h>

struct Data : torch::data::datasets::Dataset<Data> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 16; }
};

int main() {
  // CHECK: {{^}}+  acc::Accelerator accelerator(acc::AcceleratorOptions().step_scheduler_with_optimizer(false));
  // PER-BATCH: {{^}}+  acc::Accelerator accelerator;
  auto model = std::make_shared<torch::nn::LinearImpl>(4, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::StepLR scheduler(optimizer, /*step_size=*/2);
  // CHECK: {{^}}+  acc::Scheduler<torch::optim::StepLR> scheduler(optimizer, /*step_size=*/2);
  auto loader = torch::data::make_data_loader(Data(), 8);
  for (int epoch = 0; epoch < 4; ++epoch) {
    for (auto &batch : *loader) {
      optimizer.zero_grad();
      auto loss = model->forward(batch[0].data);
      loss.backward();
      optimizer.step();
#ifdef PER_BATCH
      scheduler.step();
#endif
    }
#ifndef PER_BATCH
    scheduler.step();
    // NOTE: scheduler-declaration-per-epoch.cpp:[[@LINE-1]]:15: scheduler-declaration: this scheduler steps outside the loop of the optimizer's step (e.g. once per epoch); a prepared scheduler would step once per process each time; the accelerator created here gets AcceleratorOptions().step_scheduler_with_optimizer(false): one step per call
#endif
  }
}
