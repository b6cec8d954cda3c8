// Draws a progress bar on stdout for progress_bar_test: `acc_tracking_bar_demo N SLEEP_MS`.
// The bar decides by itself whether stdout is a terminal (redraw in place) or not (lines).
#include <chrono>
#include <cstdlib>
#include <thread>

#include <acc/progress_bar.h>

int main(int argc, char** argv) {
  const int64_t total = argc > 1 ? std::atoll(argv[1]) : 10;
  const int sleep_ms = argc > 2 ? std::atoi(argv[2]) : 0;
  acc::ProgressBar bar(acc::ProgressBarOptions()
                           .total(total)
                           .description("train")
                           .stream(stdout)
                           .refresh_secs(0)
                           .plain_secs(0)
                           .ascii(true));
  for (int64_t i = 0; i < total; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    bar.set_postfix({{"loss", 1.0 / static_cast<double>(i + 1)}});
    if (i == total / 2) bar.write("halfway");
    bar.update();
  }
  bar.close();
  return 0;
}
