// RUN: %acc-migrate --rules=save-on-main-process %s -- %stub-flags 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
#include <torch/torch.h>

void train(torch::nn::Linear &model) {
  for (int epoch = 0; epoch < 2; ++epoch) {
    torch::save(model, "checkpoint.pt");
    // CHECK: {{^}}-    torch::save(model, "checkpoint.pt");
    // CHECK-NEXT: {{^}}+    accelerator.wait_for_everyone();
    // CHECK-NEXT: {{^}}+    if (accelerator.is_main_process()) torch::save(model, "checkpoint.pt");
  }
  if (true) torch::save(model, "last.pt");
  // REPORT: save-on-main-process.cpp:[[@LINE-1]]:13: save-on-main-process: torch::save runs on every process
  // REPORT-SAME: `accelerator.wait_for_everyone(); if (accelerator.is_main_process()) torch::save(model, "last.pt");`
}

// A save under a condition that may differ between processes gets no barrier: the ranks that skip
// it would never reach theirs, and the others would wait until the timeout.
void keep_best(torch::nn::Linear &model, torch::Tensor loss, int epochs) {
  float best = -1e9f;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    float reward = loss.item<float>();
    if (reward > best) {
      // REPORT: save-on-main-process.cpp:[[@LINE-1]]:9: save-on-main-process: the save is under `reward > best`, which may differ between processes: no wait_for_everyone() inserted (it would hang the ranks that do not reach it); make the condition global, e.g. `accelerator.reduce(torch::tensor(reward), "max")`, then save after a barrier every rank reaches
      best = reward;
      torch::save(model, "best.pt");
      // CHECK: {{^}}-      torch::save(model, "best.pt");
      // CHECK-NEXT: {{^}}+      if (accelerator.is_main_process()) torch::save(model, "best.pt");
    }
    // A condition every rank computes alike keeps the barrier.
    if (epoch % 10 == 0) {
      torch::save(model, "periodic.pt");
      // CHECK: {{^}}-      torch::save(model, "periodic.pt");
      // CHECK-NEXT: {{^}}+      accelerator.wait_for_everyone();
      // CHECK-NEXT: {{^}}+      if (accelerator.is_main_process()) torch::save(model, "periodic.pt");
    }
  }
}

// A break on a rank-local value ends the loop earlier on some ranks: a later iteration's barrier
// would wait for them.
void early_stop(torch::nn::Linear &model, torch::Tensor loss) {
  for (int step = 0; step < 100; ++step) {
    torch::save(model, "step.pt");
    // CHECK: {{^}}-    torch::save(model, "step.pt");
    // CHECK-NEXT: {{^}}+    if (accelerator.is_main_process()) torch::save(model, "step.pt");
    if (loss.item<float>() < 0.1f) break;
    // REPORT: save-on-main-process.cpp:[[@LINE-1]]:9: save-on-main-process: the save is under `loss.item<float>() < 0.1f`{{.*}}`accelerator.reduce(loss, "max")`
  }
}

// So does a return before the save.
void finish(torch::nn::Linear &model, torch::Tensor loss) {
  if (loss.item<float>() > 1.0f) return;
  // REPORT: save-on-main-process.cpp:[[@LINE-1]]:7: save-on-main-process: the save is under `loss.item<float>() > 1.0f`
  torch::save(model, "final.pt");
  // CHECK: {{^}}-  torch::save(model, "final.pt");
  // CHECK-NEXT: {{^}}+  if (accelerator.is_main_process()) torch::save(model, "final.pt");
}

// Every rank runs the loop over a prepared loader equally often, and a counter stepped by one is the
// same on every rank.
template <typename Loader> void per_batches(torch::nn::Linear &model, Loader &loader) {
  int batch_index = 0;
  for (auto &batch : *loader) {
    if (++batch_index % 100 == 0) {
      torch::save(model, "batches.pt");
      // CHECK: {{^}}-      torch::save(model, "batches.pt");
      // CHECK-NEXT: {{^}}+      accelerator.wait_for_everyone();
    }
  }
}
struct Digits : torch::data::datasets::Dataset<Digits> {};
void run_batches(torch::nn::Linear &model) {
  auto loader = torch::data::make_data_loader(Digits());
  per_batches(model, loader);
}
// REPORT-NOT: save-on-main-process.cpp:{{.*}}the save is under `{{.*}}batch
