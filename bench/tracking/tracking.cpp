// Overhead of logging and of a progress bar at every training step: the same loop (a fixed
// amount of arithmetic standing in for a step) with and without them, in one run.
//   acc_bench_tracking [STEPS]
// Prints ns per step and the overhead per call against the bare loop.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include <acc/progress_bar.h>
#include <acc/tracking.h>

#include "tracking/tracker_set.h"

namespace {

volatile double sink = 0;

// About a microsecond of work: a stand-in for the rest of a (very short) training step.
double step_work(int64_t step) {
  double x = static_cast<double>(step);
  for (int i = 0; i < 300; ++i) x = x * 0.999 + 1e-3;
  return x;
}

double ns_per_step(int64_t steps, const std::function<void(int64_t, double)>& extra) {
  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < steps; ++step) {
    const double loss = step_work(step);
    extra(step, loss);
    sink = loss;
  }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
             .count() /
         static_cast<double>(steps);
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 200000;
  const auto dir = std::filesystem::temp_directory_path() / "acc-bench-tracking";
  // rm, not std::filesystem::remove_all: libtorch.so exports a copy of it that crashes here.
  const std::string remove_dir = "rm -rf '" + dir.string() + "'";
  if (std::system(remove_dir.c_str()) != 0) return 1;
  FILE* devnull = std::fopen("/dev/null", "w");

  const auto bare = [](int64_t, double) {};
  ns_per_step(steps / 10, bare);  // warm-up
  const double baseline = ns_per_step(steps, bare);
  std::printf("steps %lld; bare loop: %.1f ns/step\n", static_cast<long long>(steps), baseline);
  std::printf("%-44s %12s %14s %8s\n", "per step", "ns/step", "overhead ns", "ratio");
  const auto report = [&](const char* what, double ns) {
    std::printf("%-44s %12.1f %14.1f %8.3f\n", what, ns, ns - baseline, ns / baseline);
  };

  // What every log call pays before acc sees it: the caller builds the values map.
  report("build the 2-value map only (no log)", ns_per_step(steps, [&](int64_t, double loss) {
           const acc::TrackerValues values{{"loss", loss}, {"lr", 1e-3}};
           sink = static_cast<double>(values.size());
         }));
  for (const char* name : {"tensorboard", "jsonl", "csv", "all"}) {
    acc::detail::TrackerSet trackers(acc::LogWith{name}, /*is_main_process=*/true, dir.string());
    trackers.init(std::string("bench_") + name, {{"lr", 0.1}});
    const double ns = ns_per_step(steps, [&](int64_t step, double loss) {
      trackers.log({{"loss", loss}, {"lr", 1e-3}}, step);
    });
    trackers.finish();
    report((std::string("log 2 values, main process, ") + name).c_str(), ns);
  }
  {
    acc::detail::TrackerSet trackers(acc::LogWith{"all"}, /*is_main_process=*/false, dir.string());
    trackers.init("bench_other", {{"lr", 0.1}});
    report("log 2 values, other process, all", ns_per_step(steps, [&](int64_t step, double loss) {
             trackers.log({{"loss", loss}, {"lr", 1e-3}}, step);
           }));
  }
  const auto bar_cost = [&](const char* what, acc::ProgressBarOptions options) {
    acc::ProgressBar bar(options.total(steps).stream(devnull));
    report(what, ns_per_step(steps, [&](int64_t, double loss) {
             bar.set_postfix({{"loss", loss}});
             bar.update();
           }));
  };
  bar_cost("bar update + postfix, terminal (10 Hz)", acc::ProgressBarOptions().terminal(true));
  bar_cost("bar update + postfix, pipe (lines every 10 s)",
           acc::ProgressBarOptions().terminal(false));
  bar_cost("bar update + postfix, disabled", acc::ProgressBarOptions().disable(true));
  std::fclose(devnull);
  return std::system(remove_dir.c_str()) == 0 ? 0 : 1;
}
