// every-rank-side-effect reports what every process does that one should (other than torch::save):
// writing files, and progress counts compared with the whole dataset, in functions that use the
// accelerator (the fact accelerator-users). Alone, no function uses one, so there is nothing to report:
// RUN: %acc-migrate --rules=every-rank-side-effect %s -- %stub-flags 2>&1 | FileCheck --check-prefix=ALONE %s
// ALONE-NOT: every-rank-side-effect:
// With backward, train() uses the accelerator:
// RUN: %acc-migrate --rules=backward,every-rank-side-effect %s -- %stub-flags 2>%t.err | FileCheck --check-prefix=DIFF %s
// RUN: FileCheck %s < %t.err
#include <torch/torch.h>
#include <acc/acc.h>
#include <cstdio>
#include <filesystem>
#include <fstream>

struct Digits : torch::data::datasets::Dataset<Digits> {};
namespace cv {
inline bool imwrite(const std::string &, const torch::Tensor &) { return true; }
}  // namespace cv
// A project function that saves with torch::save: save-on-main-process guards that save.
inline void save_checkpoint(const torch::Tensor &t) { torch::save(t, "checkpoint.pt"); }

void train(torch::Tensor loss, Digits &dataset) {
  std::filesystem::create_directories("runs");
  // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:3: every-rank-side-effect: std::filesystem::create_directories changes the file system on every process; do it on the main process only: `if (accelerator.is_main_process()) { ... }`, or give each process its own file (`accelerator.process_index()` in its name)
  std::ofstream log("runs/log.txt");
  // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:17: every-rank-side-effect: std::ofstream writes a file on every process (all of them write the same file); do it on the main process only
  std::ofstream metrics;
  metrics.open("runs/metrics.csv");
  // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:3: every-rank-side-effect: std::ofstream::open writes a file on every process
  FILE *losses = std::fopen("runs/losses.txt", "a");
  // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:18: every-rank-side-effect: fopen for writing writes a file on every process
  FILE *config = std::fopen("config.txt", "r");  // reading is every process's business
  // CHECK-NOT: every-rank-side-effect.cpp:[[@LINE-1]]
  size_t seen = 0;
  auto loader = torch::data::make_data_loader(Digits());
  for (auto &batch : *loader) {
    loss.backward();
    seen += batch.size();
    if (seen >= dataset.size().value()) break;
    // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:9: every-rank-side-effect: every process compares its own count of batches, `seen`, with the size of the whole dataset: with a prepared loader it sees only its shard, so it never reaches `seen >= dataset.size().value()`'s total; compare with this process's share (the dataset's size divided by `accelerator.num_processes()`), and report progress on the main process only (`if (accelerator.is_main_process())`)
    cv::imwrite("sample.png", loss);
    // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:5: every-rank-side-effect: cv::imwrite writes on every process (all of them write the same output); do it on the main process only
    save_checkpoint(loss);
    // CHECK-NOT: every-rank-side-effect.cpp:[[@LINE-1]]
  }
  std::fclose(losses);
  std::fclose(config);
}

// Code that already picks a process is left alone.
void evaluate(acc::Accelerator &accelerator, torch::Tensor loss) {
  loss.backward();
  if (accelerator.is_main_process()) {
    std::ofstream out("eval.txt");
    // CHECK-NOT: every-rank-side-effect.cpp:[[@LINE-1]]
  }
}

// No accelerator here: not reported.
void export_data() {
  std::ofstream out("data.csv");
  // CHECK-NOT: every-rank-side-effect.cpp:[[@LINE-1]]
}
// The report changes nothing by itself.
// DIFF-NOT: {{^}}+{{.*}}std::ofstream
