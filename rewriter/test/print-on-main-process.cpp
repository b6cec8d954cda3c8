// print-on-main-process rewrites prints in functions that use the accelerator (the fact
// accelerator-users, produced by the rules that write `accelerator.`). Alone, no function uses one,
// so nothing changes:
// RUN: %acc-migrate --rules=print-on-main-process %s 2>&1 | sed '/^acc-migrate: /d' | FileCheck --allow-empty --check-prefix=ALONE %s
// ALONE-NOT: accelerator
// With backward, train() uses the accelerator; with reduce-metrics, an epoch's total is the same on
// every process after its loop and prints as it is:
// RUN: %acc-migrate --rules=backward,reduce-metrics,print-on-main-process %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
// Running again on the output changes nothing.
// RUN: rm -rf %t && mkdir -p %t && cp %s %t/print.cpp
// RUN: %acc-migrate --in-place --rules=backward,reduce-metrics,print-on-main-process %t/print.cpp
// RUN: %acc-migrate --rules=backward,reduce-metrics,print-on-main-process %t/print.cpp > %t/again.diff
// RUN: not grep . %t/again.diff
#include <torch/torch.h>

#include <cstdio>
#include <iomanip>
#include <iostream>

struct Pairs : torch::data::datasets::Dataset<Pairs> {
  torch::data::Example<> get(size_t i) override { return {torch::ones({4}) * static_cast<double>(i), torch::ones({1})}; }
  torch::optional<size_t> size() const override { return 64; }
};
using Loader = torch::data::StatelessDataLoader<torch::data::datasets::MapDataset<Pairs, torch::data::transforms::Stack<>>,
                                                torch::data::samplers::SequentialSampler>;

void train(torch::nn::Linear &model, Loader &loader) {
  for (int epoch = 0; epoch < 3; ++epoch) {
    double total = 0;
    for (auto &batch : loader) {
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      total += loss.item<double>();
      // A loss is a mean over this process's samples: printed as the mean over the processes.
      std::cout << "epoch " << epoch << " loss " << loss.item<float>() << std::endl;
      // CHECK: {{^}}+      accelerator.print("epoch ", epoch, " loss ", accelerator.reduce(loss.item<float>(), "mean"));
      // A reduction is a collective: for printf, every process computes it before the guard.
      std::printf("loss %.4f\n", loss.item<float>());
      // CHECK: {{^}}+      const auto loss_mean = accelerator.reduce(loss.item<float>(), "mean");
      // CHECK-NEXT: {{^}}+      if (accelerator.is_local_main_process()) std::printf("loss %.4f\n", loss_mean);
      std::cout << "batch done" << '\n';
      // CHECK: {{^}}+      accelerator.print("batch done");
      std::cout << "epoch " << epoch << " still running\n";
      // CHECK: {{^}}+      accelerator.print("epoch ", epoch, " still running");
      std::cout << "first sample " << batch.data[0][0].item<float>() << std::endl;
      // CHECK: {{^}}+      accelerator.print("first sample ", batch.data[0][0].item<float>());
      // REPORT: print-on-main-process.cpp:[[@LINE-2]]:39: print-on-main-process: `batch.data[0][0].item<float>()` differs between processes and is printed by the main process only, as its own value; print the value over all processes: `accelerator.reduce(batch.data[0][0].item<float>(), "mean")`
      if (loss.item<float>() < 0.1f) {
        std::cout << "low " << loss.item<float>() << std::endl;
        // CHECK: {{^}}+        accelerator.print("low ", loss.item<float>());
        // REPORT: print-on-main-process.cpp:[[@LINE-2]]:32: print-on-main-process: `loss.item<float>()` differs between processes and only the main process prints it, but the print is under `loss.item<float>() < 0.1f`, which may differ between processes too
      }
      // The unbraced body of an if: the print is the statement; printf's lines get braces.
      if (epoch % 2 == 0) std::cout << "even epoch " << loss.item<float>() << std::endl;
      // CHECK: {{^}}+      if (epoch % 2 == 0) accelerator.print("even epoch ", accelerator.reduce(loss.item<float>(), "mean"));
      if (epoch % 2 == 1) std::printf("odd epoch %f\n", loss.item<double>());
      else std::puts("even");
      // CHECK: {{^}}+      if (epoch % 2 == 1) { const auto loss_mean2 = accelerator.reduce(loss.item<double>(), "mean"); if (accelerator.is_local_main_process()) std::printf("odd epoch %f\n", loss_mean2); }
      // CHECK-NEXT: {{^}}+      else { if (accelerator.is_local_main_process()) std::puts("even"); }
      std::cout << "no newline";
      // CHECK-NOT: {{^}}+{{.*}}no newline
    }
    std::cout << "epoch " << epoch << " total " << total << std::endl;
    // CHECK: {{^}}+    accelerator.print("epoch ", epoch, " total ", total);
  }
  std::cout << std::fixed << std::setprecision(3) << 1.5 << std::endl;
  // CHECK: {{^}}+  accelerator.print(std::fixed, std::setprecision(3), 1.5);
  int lines = 0;
  std::printf("%d lines\n", ++lines);
  // CHECK-NOT: {{^}}+{{.*}}++lines
  // REPORT: print-on-main-process.cpp:[[@LINE-2]]:29: print-on-main-process: printf prints on every process, and its argument `++lines` changes the program
  std::puts("done");
  // CHECK: {{^}}+  if (accelerator.is_local_main_process()) std::puts("done");
}

// No accelerator here: not a function of the training program's processes to rewrite.
void helper() {
  for (int i = 0; i < 2; ++i) std::cout << i << std::endl;
  // CHECK-NOT: {{^}}+{{.*}}accelerator.print(i)
}
// REPORT-NOT: print-on-main-process.cpp:{{.*}}no newline
