// Manual gradient accumulation (the loss divided by k, the optimizer stepped after every k-th batch)
// becomes accelerator.accumulate, with the accelerator created with gradient_accumulation_steps(k);
// every shape near it that is not proven equal is reported with the change to make.
// RUN: %acc-migrate --rules=gradient-accumulation %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
// RUN: FileCheck --check-prefix=FOUND %s < %t.err
// With the rules whose edits it repeats (backward, optimizer-declaration): the same edits, merged.
// RUN: %acc-migrate --rules=gradient-accumulation,backward,optimizer-declaration %s 2>%t.merged | FileCheck --check-prefix=MERGED %s
// RUN: FileCheck --check-prefix=NO-CONFLICT %s < %t.merged
// k from argv, in main: its initializer is evaluated again where the accelerator is created.
// RUN: echo '#define STEPS_FROM_ARGV' > %t.argv.cpp && cat %s >> %t.argv.cpp
// RUN: %acc-migrate --rules=gradient-accumulation %t.argv.cpp 2>/dev/null | FileCheck --check-prefix=ARGV %s
// A file that creates its own accelerator: reported, not rewritten.
// RUN: echo '#define HAS_ACCELERATOR' > %t.acc.cpp && cat %s >> %t.acc.cpp
// RUN: %acc-migrate --rules=gradient-accumulation %t.acc.cpp 2>&1 | FileCheck --check-prefix=HAS-ACC %s
// Migrated code changes nothing more, and nothing is reported again but what was left. It includes
// <acc/acc.h>, which needs acc/environment.h (the source tree's contract/) and acc/version.h (generated
// by the runtime's configure): the flags an acc-migrate inferred from its build tree name neither, so
// they are given here, version.h made from its template.
// RUN: rm -rf %t.dir && mkdir -p %t.dir/gen/acc && cp %s %t.dir/ga.cpp
// RUN: sed -e 's/@[A-Z_]*@/0/g' %S/../../runtime/include/acc/version.h.in > %t.dir/gen/acc/version.h
// RUN: %acc-migrate --in-place --rules=gradient-accumulation,backward,optimizer-declaration %t.dir/ga.cpp 2>/dev/null
// RUN: %acc-migrate --rules=gradient-accumulation,backward,optimizer-declaration %t.dir/ga.cpp -- -isystem %S/../../contract -isystem %t.dir/gen 2>%t.again >%t.again.diff
// RUN: FileCheck --allow-empty --check-prefix=EMPTY %s < %t.again.diff
// RUN: FileCheck --check-prefix=AGAIN %s < %t.again
#include <torch/torch.h>

#include <cstdio>
#include <functional>
#include <string>
#ifdef HAS_ACCELERATOR
namespace acc {
class Accelerator {};  // what acc-migrate recognises: the class acc::Accelerator
}  // namespace acc
#endif

struct Data : torch::data::datasets::Dataset<Data> {
  torch::data::Example<> get(size_t i) override { return {torch::full({4}, double(i)), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 64; }
};

struct NetImpl : torch::nn::Module {
  NetImpl() : fc(register_module("fc", torch::nn::Linear(4, 1))) {}
  torch::Tensor forward(torch::Tensor x) { return fc->forward(x); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Net);

auto makeLoader() { return torch::data::make_data_loader(Data().map(torch::data::transforms::Stack<>()), 8); }

constexpr int kAccumulation = 4;

// The accelerator of this file (main's) is created with the k of every loop rewritten here.
int main(int argc, char **argv) {
#ifdef HAS_ACCELERATOR
  acc::Accelerator accelerator;
#endif
#ifdef STEPS_FROM_ARGV
  const int accumulation_steps = argc > 1 ? std::stoi(argv[1]) : 4;
#else
  const int accumulation_steps = kAccumulation;
#endif
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  optimizer.zero_grad();  // before the loop: acc's zero_grad works there (gradients are in sync)
  for (int epoch = 0; epoch < 2; ++epoch) {
    size_t batch_idx = 0;
    for (auto &batch : *loader) {
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / accumulation_steps;
      loss.backward();
      // FOUND: gradient-accumulation.cpp:[[@LINE+1]]:7: gradient-accumulation: accelerator.accumulate steps after every accumulation_steps-th batch and at the end of each pass over the prepared loader (Accelerate's rule): the steps of the original when the loader's batches per epoch are a multiple of accumulation_steps; otherwise the last, shorter group of each epoch is stepped too (its loss still divided by accumulation_steps)
      if ((batch_idx + 1) % accumulation_steps == 0) {
        optimizer.step();
        optimizer.zero_grad();
      }
      ++batch_idx;
    }
  }
}
// CHECK-LABEL: {{^}} int main(int argc, char **argv) {
// CHECK-NEXT: {{^}}+  acc::Accelerator accelerator(acc::AcceleratorOptions().gradient_accumulation_steps(kAccumulation));
// CHECK: {{^}}-  torch::optim::SGD optimizer(model->parameters(), 0.1);
// CHECK-NEXT: {{^}}+  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
// CHECK: {{^}}-    size_t batch_idx = 0;
// CHECK-NEXT: {{^}}     for (auto &batch : *loader) {
// CHECK-NEXT: {{^}}-      auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / accumulation_steps;
// CHECK-NEXT: {{^}}-      loss.backward();
// CHECK-NEXT: {{^}}+      auto accumulate = accelerator.accumulate(model);
// CHECK-NEXT: {{^}}+      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
// CHECK-NEXT: {{^}}+      accelerator.backward(loss);
// CHECK-NEXT: {{^}}       // {{F}}OUND
// CHECK-NEXT: {{^}}-      if ((batch_idx + 1) % accumulation_steps == 0) {
// CHECK-NEXT: {{^}}-        optimizer.step();
// CHECK-NEXT: {{^}}-        optimizer.zero_grad();
// CHECK-NEXT: {{^}}-      }
// CHECK-NEXT: {{^}}-      ++batch_idx;
// CHECK-NEXT: {{^}}+      optimizer.step();
// CHECK-NEXT: {{^}}+      optimizer.zero_grad();
// CHECK-NEXT: {{^}}     }
// MERGED: {{^}}+  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
// MERGED: {{^}}+      auto accumulate = accelerator.accumulate(model);
// MERGED: {{^}}+      accelerator.backward(loss);
// MERGED: {{^}}+      optimizer.step();
// NO-CONFLICT-NOT: conflicts with an edit
// ARGV: {{^}}+  acc::Accelerator accelerator(acc::AcceleratorOptions().gradient_accumulation_steps(argc > 1 ? std::stoi(argv[1]) : 4));
// ARGV: {{^}}+      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
// ARGV: {{^}}+      optimizer.step();

#if !defined(STEPS_FROM_ARGV) && !defined(HAS_ACCELERATOR)
// The `if` guards more than step()/zero_grad() (a print, a scheduler): it stays, on the batches that
// step. The loss is read after backward: divided again there, so the figures printed stay the same.
// `++step` in the condition, read by the print: it stays, as a statement.
void printed() {
  auto model = std::make_shared<NetImpl>();
  auto optimizer = std::make_shared<torch::optim::Adam>(model->parameters());
  torch::optim::StepLR scheduler(*optimizer, 10);
  auto loader = makeLoader();
  int step = 0;
  double running = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
    loss /= kAccumulation;
    loss.backward();
    running += loss.item<double>();
    if (++step % kAccumulation == 0) {
      optimizer->step();
      optimizer->zero_grad();
      scheduler.step();
      std::printf("step %d loss %.4f\n", step / kAccumulation, running);
      running = 0;
    }
  }
}
// Whatever the `if` becomes, the optimizer is created as acc::Optimizer (the runtime rejects a plain one).
// CHECK: {{^}}+  auto optimizer = std::make_shared<acc::Optimizer<torch::optim::Adam>>(model->parameters());
// CHECK-LABEL: {{^}}   double running = 0;
// CHECK-NEXT: {{^}}   for (auto &batch : *loader) {
// CHECK-NEXT: {{^}}+    auto accumulate = accelerator.accumulate(model);
// CHECK-NEXT: {{^}}     auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
// CHECK-NEXT: {{^}}+    accelerator.backward(loss);
// CHECK-NEXT: {{^}}     loss /= kAccumulation;
// CHECK-NEXT: {{^}}-    loss.backward();
// CHECK-NEXT: {{^}}     running += loss.item<double>();
// CHECK-NEXT: {{^}}-    if (++step % kAccumulation == 0) {
// CHECK-NEXT: {{^}}+    ++step;
// CHECK-NEXT: {{^}}+    if (accelerator.sync_gradients()) {
// CHECK-NEXT: {{^}}       optimizer->step();

// `i % k == k - 1`, the counter incremented after the `if` and read by nothing else: it goes.
// `loss = loss / k;` and the loss not read afterwards: the division goes.
void lastOfGroup() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int64_t i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model(batch.data), batch.target);
    loss = loss / kAccumulation;
    loss.backward();
    if (i % kAccumulation == kAccumulation - 1) optimizer.step(), optimizer.zero_grad();
    i++;
  }
}
// CHECK: {{^}}+  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
// CHECK-LABEL: {{^}}-  int64_t i = 0;
// CHECK-NEXT: {{^}}   for (auto &batch : *loader) {
// CHECK-NEXT: {{^}}+    auto accumulate = accelerator.accumulate(model);
// CHECK-NEXT: {{^}}     auto loss = torch::mse_loss(model(batch.data), batch.target);
// CHECK-NEXT: {{^}}-    loss = loss / kAccumulation;
// CHECK-NEXT: {{^}}-    loss.backward();
// CHECK-NEXT: {{^}}-    if (i % kAccumulation == kAccumulation - 1) optimizer.step(), optimizer.zero_grad();
// CHECK-NEXT: {{^}}-    i++;
// CHECK-NEXT: {{^}}+    accelerator.backward(loss);
// CHECK-NEXT: {{^}}+    if (accelerator.sync_gradients()) optimizer.step(), optimizer.zero_grad();
// CHECK-NEXT: {{^}}   }
// Nothing else is rewritten: the loops below are reported.
// CHECK-NOT: {{^}}{{[-+]}}

// A function template: analysed in its instantiation (concrete types), edited in its text.
template <class Model>
void templated(Model &model) {
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (++i % kAccumulation == 0) {
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}
void useTemplated(Net &model) { templated(model); }
// CHECK-LABEL: {{^}}-void templated(Model &model) {
// CHECK-NEXT: {{^}}-  torch::optim::SGD optimizer(model->parameters(), 0.1);
// CHECK-NEXT: {{^}}+void templated(acc::Accelerator& accelerator, Model &model) {
// CHECK-NEXT: {{^}}+  acc::Optimizer<torch::optim::SGD> optimizer(model->parameters(), 0.1);
// CHECK-NEXT: {{^}}   auto loader = makeLoader();
// CHECK-NEXT: {{^}}-  int i = 0;
// CHECK-NEXT: {{^}}   for (auto &batch : *loader) {
// CHECK-NEXT: {{^}}-    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
// CHECK-NEXT: {{^}}-    loss.backward();
// CHECK-NEXT: {{^}}-    if (++i % kAccumulation == 0) {
// CHECK-NEXT: {{^}}-      optimizer.step();
// CHECK-NEXT: {{^}}-      optimizer.zero_grad();
// CHECK-NEXT: {{^}}-    }
// CHECK-NEXT: {{^}}+    auto accumulate = accelerator.accumulate(model);
// CHECK-NEXT: {{^}}+    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
// CHECK-NEXT: {{^}}+    accelerator.backward(loss);
// CHECK-NEXT: {{^}}+    optimizer.step();
// CHECK-NEXT: {{^}}+    optimizer.zero_grad();
// CHECK-NEXT: {{^}}   }

// --- Reported, left as is -----------------------------------------------------------------------

// The gradients of k batches summed, not averaged: accelerator.backward would divide them.
void summed() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
    loss.backward();
    if (++i % kAccumulation == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: the loss is not divided by kAccumulation (once, before backward): the gradients of kAccumulation batches are summed, or scaled by hand; it is correct on N processes, but every batch all-reduces the gradients; to keep that sum with accelerator.accumulate, which divides the loss by kAccumulation, write `accelerator.backward(loss * kAccumulation)`; by hand: create the accelerator with `acc::AcceleratorOptions().gradient_accumulation_steps(kAccumulation)`, start the loop body with `auto accumulate = accelerator.accumulate(model);`, drop the division of the loss by kAccumulation (accelerator.backward divides by it) and step under `if (accelerator.sync_gradients())`
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

// A division, and a step under another test.
void countedDown() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int count = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (++count == kAccumulation) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++count == kAccumulation`) left as is: the loss is divided by `kAccumulation`, but the condition is not a step after every kAccumulation-th batch (`(i + 1) % kAccumulation == 0`, i counting the loader's batches from 0); it is correct on N processes, but every batch all-reduces the gradients; if it is one, write it so; then acc-migrate rewrites the loop; by hand:
      optimizer.step();
      optimizer.zero_grad();
      count = 0;
    }
  }
}

// No DataLoader: accumulate also steps at the end of each pass over a prepared loader.
void indexLoop(torch::Tensor inputs, torch::Tensor targets) {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  for (int64_t i = 0; i < inputs.size(0); ++i) {
    auto loss = torch::mse_loss(model->forward(inputs[i]), targets[i]) / kAccumulation;
    loss.backward();
    if ((i + 1) % kAccumulation == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `(i + 1) % kAccumulation == 0`) left as is: the loop does not iterate a DataLoader, and accelerator.accumulate also steps at the end of each pass over a prepared loader; it is correct on N processes, but every batch all-reduces the gradients; iterate the data through `accelerator.prepare_data_loader(...)` (a torch Dataset), then by hand:
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

// Steps after batches 1, k + 1, ...: not where accumulate steps.
void offByOne() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (i % kAccumulation == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `i % kAccumulation == 0`) left as is: `i % kAccumulation == 0` does not hold exactly after batches kAccumulation, 2*kAccumulation, ... (counting from 1), where accelerator.accumulate steps; it is correct on N processes, but every batch all-reduces the gradients; count the batches in an integer `i` set to 0 before the loop and incremented once per batch, and write `(i + 1) % kAccumulation == 0`; then acc-migrate rewrites the loop; by hand:
      optimizer.step();
      optimizer.zero_grad();
    }
    ++i;
  }
}

// zero_grad on every batch: nothing accumulates (acc's zero_grad would keep the gradients).
void zeroedEveryBatch() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    optimizer.zero_grad();
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (++i % kAccumulation == 0) optimizer.step();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: `optimizer.zero_grad()` runs outside the `if` that steps; it is correct on N processes, but every batch all-reduces the gradients; call zero_grad right after step() inside the `if`; then acc-migrate rewrites the loop; by hand:
  }
}

// k known only in this function (a parameter): the accelerator is created before.
void stepsFromCaller(int k) {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / k;
    loss.backward();
    if (++i % k == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % k == 0`) left as is: `k` is not known where the accelerator is created (the start of the program's entry point): a compile-time constant is, and so is, in main, a value computed from argc/argv only; it is correct on N processes, but every batch all-reduces the gradients; compute it before the accelerator and create it with it; by hand: create the accelerator with `acc::AcceleratorOptions().gradient_accumulation_steps(k)`, start the loop body with `auto accumulate = accelerator.accumulate(model);`
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

// Another k than the other loops of this file: one accelerator, one gradient_accumulation_steps.
void otherSteps() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / 2;
    loss.backward();
    if (++i % 2 == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation left as is: another loop of this file accumulates with gradient_accumulation_steps(kAccumulation), and the accelerator has one gradient_accumulation_steps; it is correct on N processes, but every batch all-reduces the gradients
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

// Two losses (a GAN): two backward calls.
void twoLosses() {
  Net generator, discriminator;
  torch::optim::Adam g_opt(generator->parameters()), d_opt(discriminator->parameters());
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto d_loss = discriminator->forward(batch.data).mean() / kAccumulation;
    d_loss.backward();
    auto g_loss = -discriminator->forward(generator->forward(batch.data)).mean() / kAccumulation;
    g_loss.backward();
    if (++i % kAccumulation == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: the loop calls backward more than once; it is correct on N processes, but every batch all-reduces the gradients; by hand: create the accelerator with `acc::AcceleratorOptions().gradient_accumulation_steps(kAccumulation)`, start the loop body with `auto accumulate = accelerator.accumulate(generator, discriminator);`
      g_opt.step();
      d_opt.step();
    }
  }
}

// The division inside the backward call.
void dividedInBackward() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
    (loss / kAccumulation).backward();
    if (++i % kAccumulation == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: backward is not called as a statement of the loop body on a tensor declared in it (`auto loss = ...; loss.backward();`); it is correct on N processes
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

// The loss read between its division and backward would read it undivided.
void readBeforeBackward() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    std::printf("%f\n", loss.item<float>());
    loss.backward();
    if (++i % kAccumulation == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: `loss` is written besides its division by kAccumulation, read between that division and backward, or const and read after backward; it is correct on N processes
      optimizer.step();
      optimizer.zero_grad();
    }
  }
}

// A last, shorter group stepped after the loop: accumulate already steps at the end of the loader.
void flushedAfter() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (++i % kAccumulation == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: the optimizer also steps after the loop (a last, shorter group?), which accelerator.accumulate does by itself at the end of each pass over the loader; it is correct on N processes, but every batch all-reduces the gradients; remove that step; then acc-migrate rewrites the loop;
      optimizer.step();
      optimizer.zero_grad();
    }
  }
  if (i % kAccumulation != 0) optimizer.step();
}

// An else branch, a counter that is not one, a condition of another form, a counter changed twice.
void otherShapes(bool skip) {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0, j = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (++i % kAccumulation == 0) {
      // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: the `if` that steps is not a plain statement of the loop body (no else, no declaration); it is correct on N processes, but every batch all-reduces the gradients; make it one; then acc-migrate rewrites the loop;
      optimizer.step();
    } else {
      loss.detach();
    }
  }
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if ((2 * j) % kAccumulation == 0) optimizer.step(), optimizer.zero_grad();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `(2 * j) % kAccumulation == 0`) left as is: `(2 * j)` is not a batch counter plus a constant; it is correct on N processes, but every batch all-reduces the gradients; count the batches in an integer `i` set to 0 before the loop and incremented once per batch, and write `(i + 1) % kAccumulation == 0`; then acc-migrate rewrites the loop;
    ++j;
  }
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if ((j + 1) % kAccumulation == 0 && !skip) optimizer.step(), optimizer.zero_grad();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `(j + 1) % kAccumulation == 0 && !skip`) left as is: the condition is not `X % kAccumulation == R` or `!(X % kAccumulation)`; it is correct on N processes, but every batch all-reduces the gradients; write `(i + 1) % kAccumulation == 0`, i counting the loader's batches from 0; then acc-migrate rewrites the loop;
    ++j;
  }
  int64_t k = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (!(++k % kAccumulation)) optimizer.step(), optimizer.zero_grad();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `!(++k % kAccumulation)`) left as is: `k` changes other than by one increment per batch (a statement of the loop body, or `++k` in the condition) and resets to its starting value outside the loop; it is correct on N processes, but every batch all-reduces the gradients; count the batches
    if (skip) ++k;
  }
}

// A batch skipped before the counter's increment: accumulate would count it.
void skipsBatches() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    if (batch.data.size(0) < 8) continue;
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (++i % kAccumulation == 0) optimizer.step(), optimizer.zero_grad();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: the loop body can leave a batch before the `if` that steps (`continue`, `break`, `return`, `throw`): accelerator.accumulate counts every batch the loop starts; it is correct on N processes
  }
}

// The counter does not start from a constant.
void fromElsewhere(int start) {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = start;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (++i % kAccumulation == 0) optimizer.step(), optimizer.zero_grad();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: `i` is not a local integer set to a constant before the loop; it is correct on N processes, but every batch all-reduces the gradients; count the batches
  }
}

// The optimizer comes from the caller and the loop calls its model through a std::function: which model?
void noModel(torch::optim::SGD &optimizer, const std::function<torch::Tensor(torch::Tensor)> &forward) {
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (++i % kAccumulation == 0) optimizer.step(), optimizer.zero_grad();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++i % kAccumulation == 0`) left as is: no model found whose parameters the optimizer holds, or that the loop calls; it is correct on N processes, but every batch all-reduces the gradients; by hand: create the accelerator with `acc::AcceleratorOptions().gradient_accumulation_steps(kAccumulation)`, start the loop body with `auto accumulate = accelerator.accumulate(<the models the optimizer trains>);`
  }
}

// The step before backward (the previous group's), a step also outside the `if`, no backward in the loop.
void stepFirst(const std::function<void(torch::Tensor)> &backward) {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  int i = 0, j = 0, k = 0;
  for (auto &batch : *loader) {
    if ((i + 1) % kAccumulation == 0) optimizer.step(), optimizer.zero_grad();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `(i + 1) % kAccumulation == 0`) left as is: the `if` that steps comes before backward; it is correct on N processes
    ++i;
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
  }
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    loss.backward();
    if (++j % kAccumulation == 0) optimizer.step(), optimizer.zero_grad();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++j % kAccumulation == 0`) left as is: an optimizer also steps outside the `if`; it is correct on N processes
    optimizer.step();
  }
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target) / kAccumulation;
    backward(loss);
    if (++k % kAccumulation == 0) optimizer.step(), optimizer.zero_grad();
    // REPORT: gradient-accumulation.cpp:[[@LINE-1]]:5: gradient-accumulation: manual gradient accumulation (the optimizer steps under `++k % kAccumulation == 0`) left as is: the loop calls no tensor's backward; it is correct on N processes
  }
}

// A step under a condition with no division: not accumulation, nothing to say.
void skipped(bool skip) {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), 0.1);
  auto loader = makeLoader();
  for (auto &batch : *loader) {
    auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
    loss.backward();
    if (!skip) optimizer.step();
  }
}
// REPORT-NOT: gradient-accumulation.cpp:[[@LINE-3]]

// A generator trained every n_critic batches (WGAN): its gradients are computed under the condition, nothing accumulates.
void everyNCritic(int n_critic) {
  Net generator, critic;
  torch::optim::Adam g_opt(generator->parameters()), c_opt(critic->parameters());
  auto loader = makeLoader();
  int i = 0;
  for (auto &batch : *loader) {
    c_opt.zero_grad();
    auto c_loss = critic->forward(generator->forward(batch.data).detach()).mean() - critic->forward(batch.data).mean();
    c_loss.backward();
    c_opt.step();
    if (++i % n_critic == 0) {
      g_opt.zero_grad();
      auto g_loss = -critic->forward(generator->forward(batch.data)).mean();
      g_loss.backward();
      g_opt.step();
    }
  }
}
// REPORT-NOT: gradient-accumulation.cpp:[[@LINE-8]]
#endif

// HAS-ACC-NOT: {{^}}+++
// HAS-ACC: gradient-accumulation: manual gradient accumulation (the optimizer steps under `(batch_idx + 1) % accumulation_steps == 0`) left as is: this file already creates an acc::Accelerator, which acc-migrate does not change; it is correct on N processes, but every batch all-reduces the gradients; create it with `acc::AcceleratorOptions().gradient_accumulation_steps(kAccumulation)`, then by hand:
// HAS-ACC-NOT: {{^}}+++
// EMPTY-NOT: {{.}}
// The loops left as is are reported again; the one with another k now meets the accelerator created for the first.
// AGAIN-NOT: accelerator.accumulate steps after
// AGAIN: left as is: the loss is not divided by kAccumulation
// AGAIN-NEXT: left as is: the loss is divided by `kAccumulation`, but
// AGAIN-NEXT: left as is: the loop does not iterate a DataLoader
// AGAIN-NEXT: does not hold exactly after batches
// AGAIN-NEXT: runs outside the `if` that steps
// AGAIN-NEXT: is not known where the accelerator is created
// AGAIN-NEXT: (the optimizer steps under `++i % 2 == 0`) left as is: this file already creates an acc::Accelerator
// AGAIN-NEXT: the loop calls backward more than once
// AGAIN-NEXT: backward is not called as a statement
// AGAIN-NEXT: is written besides its division
// AGAIN-NEXT: also steps after the loop
// AGAIN-NEXT: is not a plain statement
// AGAIN-NEXT: is not a batch counter
// AGAIN-NEXT: the condition is not
// AGAIN-NEXT: changes other than by one increment
// AGAIN-NEXT: the loop body can leave a batch
// AGAIN-NEXT: is not a local integer
// AGAIN-NEXT: no model found
// AGAIN-NEXT: comes before backward
// AGAIN-NEXT: also steps outside
// AGAIN-NEXT: calls no tensor's backward
// AGAIN-NOT: accelerator.accumulate steps after
