// save-on-main-process: every process would write the same file; the main process writes it, with
// barriers where every process gets to. Alone, no model is prepared:
// RUN: %acc-migrate --rules=save-on-main-process %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
// With prepare (which produces prepared-models), a prepared model's save becomes accelerator.save_model:
// RUN: %acc-migrate --rules=prepare,save-on-main-process %s 2>%t.prepared.err | FileCheck --check-prefix=PREPARED %s
// RUN: FileCheck --check-prefix=PREPARED-REPORT %s < %t.prepared.err
// A second run on the migrated file (which now includes <acc/acc.h>) changes nothing:
// RUN: rm -rf %t.dir && mkdir -p %t.dir && cp %s %t.dir/saves.cpp
// RUN: %acc-migrate --rules=prepare,save-on-main-process --in-place %t.dir/saves.cpp 2>%t.first.err
// RUN: %acc-migrate --rules=prepare,save-on-main-process %t.dir/saves.cpp 2>%t.again.err | FileCheck --allow-empty --check-prefix=AGAIN %s
// RUN: FileCheck --check-prefix=AGAIN-SUMMARY %s < %t.again.err
// AGAIN-NOT: {{.}}
// AGAIN-SUMMARY: 0 file(s) changed (0 edit(s)), 1 of 1 source(s) parsed, 0 failed
#include <torch/torch.h>

#include <fstream>
#include <string>

struct Pairs : torch::data::datasets::Dataset<Pairs> {
  torch::data::Example<> get(size_t i) override { return {torch::full({2}, double(i)), torch::full({1}, 2.0 * i)}; }
  torch::optional<size_t> size() const override { return 16; }
};

void train(torch::nn::Linear &model) {
  for (int epoch = 0; epoch < 2; ++epoch) {
    torch::save(model, "checkpoint.pt");
    // CHECK: {{^}}-    torch::save(model, "checkpoint.pt");
    // CHECK-NEXT: {{^}}+    accelerator.wait_for_everyone();
    // CHECK-NEXT: {{^}}+    if (accelerator.is_main_process()) torch::save(model, "checkpoint.pt");
  }
  // An unbraced branch gets braces, so that both statements stay under it.
  if (true) torch::save(model, "last.pt");
  // CHECK: {{^}}-  if (true) torch::save(model, "last.pt");
  // CHECK-NEXT: {{^}}+  if (true) { accelerator.wait_for_everyone(); if (accelerator.is_main_process()) torch::save(model, "last.pt"); }
}

// A save under a condition that may differ between processes gets no barrier: the ranks that skip
// it would never reach theirs, and the others would wait until the timeout. The finding names the
// lines that make the condition the same everywhere.
void keep_best(torch::nn::Linear &model, torch::Tensor loss, int epochs) {
  float best = -1e9f;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    float reward = loss.item<float>();
    if (reward > best) {
      // REPORT: save-on-main-process.cpp:[[@LINE-1]]:9: save-on-main-process: the save is under `reward > best`, which may differ between processes (`reward > best` depends on `reward`, computed from `loss.item<float>()` (line [[@LINE-2]]), which depends on `loss`, a parameter of `keep_best` whose callers acc-migrate does not see (only integral, bool and enum parameters are taken as the same on every process)): no wait_for_everyone() inserted (it would hang the ranks that do not reach it); make it the same on every process: before line [[@LINE-1]] write `reward = accelerator.reduce(reward, "mean");`, then `accelerator.wait_for_everyone();` before the save on line [[@LINE+2]]{{$}}
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
    // REPORT: save-on-main-process.cpp:[[@LINE-1]]:9: save-on-main-process: the save is under `loss.item<float>() < 0.1f`, which may differ between processes ({{.*}}): no wait_for_everyone() inserted{{.*}}; make it the same on every process: before line [[@LINE-1]] write `loss = accelerator.reduce(loss, "mean");`, then `accelerator.wait_for_everyone();` before the save on line [[@LINE-4]]{{$}}
  }
}

// So does a return before the save; a value that cannot be assigned gets a variable of its own.
void finish(torch::nn::Linear &model, const double loss) {
  if (loss > 1.0) return;
  // REPORT: save-on-main-process.cpp:[[@LINE-1]]:7: save-on-main-process: the save is under `loss > 1.0`{{.*}}before line [[@LINE-1]] write `const auto loss_all = accelerator.reduce(loss, "mean");` and test `loss_all` instead, then
  torch::save(model, "final.pt");
  // CHECK: {{^}}-  torch::save(model, "final.pt");
  // CHECK-NEXT: {{^}}+  if (accelerator.is_main_process()) torch::save(model, "final.pt");
}

// A best-model save, read back later in the function: the read waits for the write instead, where
// every rank gets to.
void best_then_reload(torch::nn::Linear &model, torch::Tensor validation, int epochs) {
  double best = 1e9;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    double val_loss = validation.item<double>();
    if (val_loss < best) {
      // REPORT: save-on-main-process.cpp:[[@LINE-1]]:9: save-on-main-process: the save is under `val_loss < best`{{.*}}before line [[@LINE-1]] write `val_loss = accelerator.reduce(val_loss, "mean");`, then `accelerator.wait_for_everyone();` before the save on line [[@LINE+2]]{{$}}
      best = val_loss;
      torch::save(model, "reload.pt");
      // CHECK: {{^}}+      if (accelerator.is_main_process()) torch::save(model, "reload.pt");
    }
  }
  torch::load(model, "reload.pt");
  // CHECK: {{^}}+  accelerator.wait_for_everyone();
  // CHECK-NEXT: {{^}}   torch::load(model, "reload.pt");
}

// Every rank reaches these saves, and the program reads the file later: a barrier after the write.
// In a loop, a read before the save reads the previous iteration's file.
void resume_each_epoch(torch::nn::Linear &model) {
  for (int epoch = 0; epoch < 3; ++epoch) {
    torch::load(model, "resume.pt");
    torch::save(model, "resume.pt");
    // CHECK: {{^}}-    torch::save(model, "resume.pt");
    // CHECK-NEXT: {{^}}+    accelerator.wait_for_everyone();
    // CHECK-NEXT: {{^}}+    if (accelerator.is_main_process()) torch::save(model, "resume.pt");
    // CHECK-NEXT: {{^}}+    accelerator.wait_for_everyone();
  }
}
// Read by a function called after the save, or through the same variable, or with an input stream.
void evaluate_saved(torch::nn::Linear &model) { torch::load(model, "eval.pt"); }
void save_then_evaluate(torch::nn::Linear &model, const std::string &path) {
  torch::save(model, "eval.pt");
  // CHECK: {{^}}-  torch::save(model, "eval.pt");
  // CHECK: {{^}}+  accelerator.wait_for_everyone();
  // CHECK-NEXT: {{^}}+  if (accelerator.is_main_process()) torch::save(model, "eval.pt");
  // CHECK-NEXT: {{^}}+  accelerator.wait_for_everyone();
  evaluate_saved(model);
  torch::save(model, path);
  // CHECK: {{^}}-  torch::save(model, path);
  // CHECK-NEXT: {{^}}+  accelerator.wait_for_everyone();
  // CHECK-NEXT: {{^}}+  if (accelerator.is_main_process()) torch::save(model, path);
  // CHECK-NEXT: {{^}}+  accelerator.wait_for_everyone();
  torch::load(model, path);
  torch::save(model, "size.pt");
  // CHECK: {{^}}+  if (accelerator.is_main_process()) torch::save(model, "size.pt");
  // CHECK-NEXT: {{^}}+  accelerator.wait_for_everyone();
  std::ifstream check("size.pt");
}
// A read before the save, outside any loop, reads an older file: no barrier after it.
void load_then_save(torch::nn::Linear &model) {
  torch::load(model, "init.pt");
  torch::save(model, "init.pt");
  // CHECK: {{^}}+  if (accelerator.is_main_process()) torch::save(model, "init.pt");
  // CHECK-NOT: {{^}}+{{.*}}wait_for_everyone
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
void run_batches(torch::nn::Linear &model) {
  auto loader = torch::data::make_data_loader(Pairs());
  per_batches(model, loader);
}
// REPORT-NOT: save-on-main-process.cpp:{{.*}}the save is under `{{.*}}batch

// Models prepared here (with prepare): every rank reaches the save and nothing reads it back, so it
// becomes accelerator.save_model, a collective that writes on the main process and waits; alone,
// nothing is prepared and they are guarded.
void fit() {
  torch::nn::Linear model(2, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  auto loader = torch::data::make_data_loader(Pairs().map(torch::data::transforms::Stack<>()), 4);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    torch::mse_loss(model->forward(batch.data), batch.target).backward();
    optimizer.step();
  }
  torch::save(model, "final_model.pt");
  // CHECK: {{^}}+  if (accelerator.is_main_process()) torch::save(model, "final_model.pt");
  // PREPARED: {{^}}-  torch::save(model, "final_model.pt");
  // PREPARED-NEXT: {{^}}+  accelerator.save_model(model, "final_model.pt");
  // PREPARED-REPORT: save-on-main-process.cpp:[[@LINE-4]]:3: save-on-main-process: torch::save of the prepared model `model` becomes accelerator.save_model: every process calls it, the main process writes, all wait (under FSDP it gathers the shards, which torch::save of one process's model would miss); `final_model.pt` is now a directory holding model.safetensors (Accelerate's layout; a file of that name from an earlier run makes save_model throw): read it back with `acc::load_checkpoint_in_model(model, "final_model.pt");`, or in Python with `safetensors.torch.load_file("final_model.pt/model.safetensors")`{{$}}
  torch::save(optimizer, "optimizer.pt");
  // PREPARED: {{^}}+  accelerator.wait_for_everyone();
  // PREPARED-NEXT: {{^}}+  if (accelerator.is_main_process()) torch::save(optimizer, "optimizer.pt");
}
// Read back with torch::load, the prepared model keeps its guarded torch::save (DDP's weights are
// whole on the main process), with a note that says why.
void fit_and_reload() {
  torch::nn::Linear model(2, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  auto loader = torch::data::make_data_loader(Pairs().map(torch::data::transforms::Stack<>()), 4);
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    torch::mse_loss(model->forward(batch.data), batch.target).backward();
    optimizer.step();
  }
  torch::save(model, "reloaded.pt");
  // PREPARED: {{^}}-  torch::save(model, "reloaded.pt");
  // PREPARED-NEXT: {{^}}+  accelerator.wait_for_everyone();
  // PREPARED-NEXT: {{^}}+  if (accelerator.is_main_process()) torch::save(model, "reloaded.pt");
  // PREPARED-NEXT: {{^}}+  accelerator.wait_for_everyone();
  // PREPARED-REPORT: save-on-main-process.cpp:[[@LINE-5]]:3: save-on-main-process: torch::save of the prepared model `model` kept (not accelerator.save_model): line [[@LINE+1]] reads the file back (`torch::load(model, "reloaded.pt")`), and save_model writes a directory of safetensors instead; under DDP the main process holds the whole model, so its torch::save is complete; under FSDP save with `accelerator.save_model(model, "reloaded.pt");` and read with `acc::load_checkpoint_in_model(model, "reloaded.pt");`{{$}}
  torch::load(model, "reloaded.pt");
}

// Code that already saves on one process is left alone (what it asks is read, not its type).
struct Process {
  bool is_main_process() const { return true; }
  int process_index() const { return 0; }
};
void guarded(Process &accelerator, torch::nn::Linear &model) {
  if (accelerator.is_main_process()) torch::save(model, "guarded.pt");
  const bool main_process = accelerator.process_index() == 0;
  if (main_process) {
    torch::save(model, "guarded_too.pt");
  }
}
// CHECK-NOT: {{^}}+{{.*}}guarded
// PREPARED-NOT: {{^}}+{{.*}}guarded
