// write-on-main-process: metrics, CSV and log files are opened, and directories created, on the main
// process only; a stream that is not open ignores writes, so every process runs the same code.
// RUN: %acc-migrate --rules=write-on-main-process %s 2>%t.err | FileCheck %s
// RUN: FileCheck --check-prefix=REPORT %s < %t.err
// A second run on the migrated file (which now includes <acc/acc.h>) changes nothing:
// RUN: rm -rf %t.dir && mkdir -p %t.dir && cp %s %t.dir/writes.cpp
// RUN: %acc-migrate --rules=write-on-main-process --in-place %t.dir/writes.cpp 2>%t.first.err
// RUN: %acc-migrate --rules=write-on-main-process %t.dir/writes.cpp 2>%t.again.err | FileCheck --allow-empty --check-prefix=AGAIN %s
// RUN: FileCheck --check-prefix=AGAIN-SUMMARY %s < %t.again.err
// AGAIN-NOT: {{.}}
// AGAIN-SUMMARY: 0 file(s) changed (0 edit(s)), 1 of 1 source(s) parsed, 0 failed
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>

// A row writer of the project: it only writes to the stream it is given.
void write_row(std::ostream &out, int epoch, double loss) { out << epoch << "," << loss << "\n"; }
// One that also asks the stream's state.
bool write_checked(std::ostream &out, double loss) {
  out << loss << "\n";
  return out.good();
}

void train(torch::Tensor loss, int epochs) {
  std::filesystem::create_directories("runs");
  // CHECK: {{^}}-  std::filesystem::create_directories("runs");
  // CHECK: {{^}}+  if (accelerator.is_main_process()) std::filesystem::create_directories("runs");
  // CHECK-NEXT: {{^}}+  accelerator.wait_for_everyone();
  std::ofstream log("runs/log.txt");
  // CHECK: {{^}}-  std::ofstream log("runs/log.txt");
  // CHECK-NEXT: {{^}}+  std::ofstream log;
  // CHECK-NEXT: {{^}}+  if (accelerator.is_main_process()) log.open("runs/log.txt");
  log << std::fixed;
  log.precision(4);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::ofstream csv("runs/metrics.csv", std::ios::app);
    // CHECK: {{^}}-    std::ofstream csv("runs/metrics.csv", std::ios::app);
    // CHECK-NEXT: {{^}}+    std::ofstream csv;
    // CHECK-NEXT: {{^}}+    if (accelerator.is_main_process()) csv.open("runs/metrics.csv", std::ios::app);
    csv << epoch << "," << loss.item<double>() << "\n";
    write_row(csv, epoch, loss.item<double>());
    log << "epoch " << epoch << std::endl;
    csv.close();
  }
  std::ofstream summary;
  summary.open("runs/summary.txt", std::ios::trunc);
  // CHECK: {{^}}-  summary.open("runs/summary.txt", std::ios::trunc);
  // CHECK-NEXT: {{^}}+  if (accelerator.is_main_process()) summary.open("runs/summary.txt", std::ios::trunc);
  summary.write("done\n", 5);
  log.flush();
}
// REPORT-NOT: write-on-main-process.cpp:{{[0-9]+}}:{{[0-9]+}}: write-on-main-process: `{{log|csv|summary}}`

// Under a condition that may differ between processes the directory is only created on the main
// process: a barrier there would hang the ranks that skip it.
void per_rank_dir(torch::Tensor loss) {
  if (loss.item<float>() < 0.5f) std::filesystem::create_directory("good");
  // CHECK: {{^}}+  if (loss.item<float>() < 0.5f) { if (accelerator.is_main_process()) std::filesystem::create_directory("good"); }
  // REPORT: write-on-main-process.cpp:[[@LINE-2]]:7: write-on-main-process: the directory is created under `loss.item<float>() < 0.5f`, which may differ between processes: created on the main process only, with no wait_for_everyone() after it (it would hang the ranks that do not reach it); if other processes use the directory next, make the condition the same on every process and write `accelerator.wait_for_everyone();` after line [[@LINE-2]]{{$}}
}

// Streams that are tested, used otherwise or read back: reported with the lines to write.
int tested() {
  std::ofstream out("out.txt");
  // REPORT: write-on-main-process.cpp:[[@LINE-1]]:17: write-on-main-process: `out` writes a file on every process (all of them write the same file), and line [[@LINE+1]] tests it (`!out`), which a stream the other processes do not open fails: not rewritten; open it on the main process only: `std::ofstream out;` and `if (accelerator.is_main_process()) out.open("out.txt");`; then make the test `if (accelerator.is_main_process() && !out)` on line [[@LINE+1]]{{$}}
  if (!out) return 1;
  out << "x";
  return 0;
}
void checked(double loss) {
  std::ofstream out("checked.txt");
  // REPORT: write-on-main-process.cpp:[[@LINE-1]]:17: write-on-main-process: `out` writes a file on every process (all of them write the same file), and line [[@LINE+1]] does more with it than write (`write_checked(out, loss)`): not rewritten; open it on the main process only: `std::ofstream out;` and `if (accelerator.is_main_process()) out.open("checked.txt");`; then run line [[@LINE+1]] on the main process only (`if (accelerator.is_main_process()) `){{$}}
  write_checked(out, loss);
}
void read_back(double loss) {
  {
    std::ofstream out("history.txt");
    // REPORT: write-on-main-process.cpp:[[@LINE-1]]:19: write-on-main-process: `out` writes a file on every process (all of them write the same file), and line [[@LINE+4]] reads the file back (`std::ifstream in("history.txt")`), and the other processes would read it before the main process has written it: not rewritten; open it on the main process only: `std::ofstream out;` and `if (accelerator.is_main_process()) out.open("history.txt");`; then write `accelerator.wait_for_everyone();` after the block that ends on line [[@LINE+2]] (where `out` is closed), before line [[@LINE+4]]{{$}}
    out << loss;
  }
  std::string line;
  std::ifstream in("history.txt");
  std::getline(in, line);
}
// CHECK-NOT: {{^}}+{{.*}}out.open

// Code that already writes on one process is left alone (what it asks is read, not its type).
struct Process {
  bool is_main_process() const { return true; }
};
void guarded(Process &accelerator) {
  if (accelerator.is_main_process()) {
    std::ofstream out("main.txt");
    out << 1;
    std::filesystem::create_directories("main");
  }
}
// CHECK-NOT: {{^}}+{{.*}}main
// REPORT-NOT: write-on-main-process.cpp:{{.*}}main.txt
