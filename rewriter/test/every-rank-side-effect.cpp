// every-rank-side-effect reports what every process does that one should (other than torch::save and
// what write-on-main-process rewrites): writing files, and progress counts compared with the whole
// dataset, in functions that use the accelerator (the fact accelerator-users), each with the lines
// to write. Alone, no function uses one, so there is nothing to report:
// RUN: %acc-migrate --rules=every-rank-side-effect %s 2>&1 | FileCheck --check-prefix=ALONE %s
// ALONE-NOT: every-rank-side-effect.cpp:{{[0-9]+}}:{{[0-9]+}}: every-rank-side-effect:
// With backward, train() uses the accelerator:
// RUN: %acc-migrate --rules=backward,every-rank-side-effect %s 2>%t.err | FileCheck --check-prefix=DIFF %s
// RUN: FileCheck %s < %t.err
// With write-on-main-process too (which produces handled-writes), what it rewrote is not reported;
// the rest still is:
// RUN: %acc-migrate --rules=backward,write-on-main-process,every-rank-side-effect %s 2>%t.handled.err
// RUN: FileCheck --check-prefix=HANDLED %s < %t.handled.err
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

struct Digits : torch::data::datasets::Dataset<Digits> {
  torch::data::Example<> get(size_t i) override { return {torch::zeros({4}), torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return 64; }
};
namespace cv {
inline bool imwrite(const std::string &, const torch::Tensor &) { return true; }
}  // namespace cv
// A project function that saves with torch::save: save-on-main-process guards that save.
inline void save_checkpoint(const torch::Tensor &t) { torch::save(t, "checkpoint.pt"); }

void train(torch::Tensor loss, Digits &dataset) {
  std::filesystem::create_directories("runs");
  // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:3: every-rank-side-effect: std::filesystem::create_directories changes the file system on every process; do it on the main process only: `if (accelerator.is_main_process()) std::filesystem::create_directories("runs");`, then `accelerator.wait_for_everyone();` where every process gets to, if the others use the path next{{$}}
  // HANDLED-NOT: every-rank-side-effect.cpp:[[@LINE-2]]:
  std::ofstream log("runs/log.txt");
  // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:17: every-rank-side-effect: std::ofstream writes a file on every process (all of them write the same file); open it on the main process only: `std::ofstream log;` and `if (accelerator.is_main_process()) log.open("runs/log.txt");` (a stream that is not open ignores writes; a test of it then fails on the other processes), or give each process its own file (`accelerator.process_index()` in its name){{$}}
  // HANDLED-NOT: every-rank-side-effect.cpp:[[@LINE-2]]:
  std::ofstream metrics;
  metrics.open("runs/metrics.csv");
  // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:3: every-rank-side-effect: std::ofstream::open writes a file on every process (all of them write the same file); open it on the main process only: `if (accelerator.is_main_process()) metrics.open("runs/metrics.csv");` (a stream that is not open ignores writes; a test of it then fails on the other processes), or give each process its own file (`accelerator.process_index()` in its name){{$}}
  // HANDLED-NOT: every-rank-side-effect.cpp:[[@LINE-2]]:
  FILE *losses = std::fopen("runs/losses.txt", "a");
  // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:18: every-rank-side-effect: fopen for writing writes a file on every process (all of them write the same file); open it on the main process only: `FILE *losses = accelerator.is_main_process() ? std::fopen("runs/losses.txt", "a") : nullptr;`, and each use of it under `if (losses)`, or give each process its own file (`accelerator.process_index()` in its name){{$}}
  // HANDLED: every-rank-side-effect.cpp:[[@LINE-2]]:18: every-rank-side-effect: fopen for writing
  FILE *config = std::fopen("config.txt", "r");  // reading is every process's business
  // CHECK-NOT: every-rank-side-effect.cpp:[[@LINE-1]]
  std::filesystem::remove_all("runs/tmp");
  // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:3: every-rank-side-effect: std::filesystem::remove_all changes the file system on every process; do it on the main process only: `if (accelerator.is_main_process()) std::filesystem::remove_all("runs/tmp");`, then `accelerator.wait_for_everyone();` where every process gets to, if the others use the path next{{$}}
  // HANDLED: every-rank-side-effect.cpp:[[@LINE-2]]:3: every-rank-side-effect: std::filesystem::remove_all
  size_t seen = 0;
  auto loader = torch::data::make_data_loader(Digits().map(torch::data::transforms::Stack<>()), 8);
  for (auto &batch : *loader) {
    loss.backward();
    seen += batch.data.size(0);
    if (seen >= dataset.size().value()) break;
    // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:9: every-rank-side-effect: every process compares its own count of batches, `seen`, with the size of the whole dataset: with a prepared loader it sees only its shard, so it never reaches `seen >= dataset.size().value()`'s total; compare with this process's share (the dataset's size divided by `accelerator.num_processes()`), and report progress on the main process only (`if (accelerator.is_main_process())`)
    // HANDLED: every-rank-side-effect.cpp:[[@LINE-2]]:9: every-rank-side-effect: every process compares
    cv::imwrite("sample.png", loss);
    // CHECK: every-rank-side-effect.cpp:[[@LINE-1]]:5: every-rank-side-effect: cv::imwrite writes on every process (all of them write the same output); do it on the main process only: `if (accelerator.is_main_process()) cv::imwrite("sample.png", loss);`, or give each process its own file (`accelerator.process_index()` in its name){{$}}
    // HANDLED: every-rank-side-effect.cpp:[[@LINE-2]]:5: every-rank-side-effect: cv::imwrite
    save_checkpoint(loss);
    // CHECK-NOT: every-rank-side-effect.cpp:[[@LINE-1]]
  }
  std::fclose(losses);
  std::fclose(config);
}

// Code that already picks a process is left alone (what it asks is read, not its type).
struct Process {
  bool is_main_process() const { return true; }
};
void evaluate(Process &accelerator, torch::Tensor loss) {
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
