#pragma once
// acc::ProgressBar: a tqdm-style progress bar for training loops (torch-free).
//   epoch 1:  42%|████████▍           | 420/1000 [00:12<00:16, 34.50it/s, loss=0.123]
// On a terminal it is redrawn in place at most every refresh_secs; when the stream is not a
// terminal (a pipe, a log file) it prints a plain line every plain_secs and one at close().
// update() costs a clock read and a comparison between redraws; a disabled bar (not the local
// main process: see Accelerator::progress_bar) costs one branch.
#include <torch/arg.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace acc {

struct ProgressBarOptions {
  using Stream = std::FILE*;  // TORCH_ARG's `const T&` needs one token for a pointer type
  /// Number of updates expected; 0 when unknown (then no percentage, bar or remaining time).
  TORCH_ARG(int64_t, total) = 0;
  TORCH_ARG(std::string, description);
  TORCH_ARG(std::string, unit) = "it";
  /// A disabled bar draws nothing.
  TORCH_ARG(bool, disable) = false;
  TORCH_ARG(Stream, stream) = stderr;
  /// Redraw in place (true) or print plain lines (false); default: whether stream is a terminal.
  TORCH_ARG(std::optional<bool>, terminal);
  /// Least time between redraws on a terminal.
  TORCH_ARG(double, refresh_secs) = 0.1;
  /// Time between plain lines when the stream is not a terminal.
  TORCH_ARG(double, plain_secs) = 10.0;
  /// Line width; 0: the terminal's width (COLUMNS, else 80, when not a terminal).
  TORCH_ARG(int, columns) = 0;
  /// '#' instead of Unicode blocks; default: Unicode when the locale is UTF-8.
  TORCH_ARG(std::optional<bool>, ascii);
};

class ProgressBar {
 public:
  using Clock = std::chrono::steady_clock;

  explicit ProgressBar(ProgressBarOptions options = {});
  ProgressBar(int64_t total, std::string description);
  ~ProgressBar();
  ProgressBar(ProgressBar&& other) noexcept = default;
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  ProgressBar& operator=(ProgressBar&&) = delete;

  /// Advances by n; draws when the last drawing is older than the interval.
  void update(int64_t n = 1) {
    count_ += n;
    if (active_.on && Clock::now() >= next_draw_) draw(false);
  }
  /// Shown after the rate, e.g. {{"loss", 0.123}}; drawn with the next redraw.
  void set_postfix(std::initializer_list<std::pair<std::string_view, double>> values);
  void set_postfix(std::string text);
  void set_description(std::string description);
  void set_total(int64_t total);
  /// Prints a line above the bar (a bar on a terminal is redrawn below it).
  void write(std::string_view line);
  /// Draws now (on a terminal) regardless of the interval.
  void refresh();
  /// Draws the final state and ends the line; later updates draw nothing. The destructor calls it.
  void close();

  int64_t count() const { return count_; }
  bool disabled() const { return !active_.on; }
  /// The text of the bar after `elapsed_secs`, `columns` wide (for terminals) or without the bar
  /// glyphs (plain lines). What draw() writes; public for tests.
  std::string line(double elapsed_secs, int columns, bool with_bar) const;

 private:
  // A moved-from bar must not draw or close: the flag moves with the bar.
  struct Active {
    bool on = false;
    Active() = default;
    explicit Active(bool value) : on(value) {}
    Active(Active&& other) noexcept : on(std::exchange(other.on, false)) {}
  };
  void draw(bool final);
  int width() const;

  ProgressBarOptions options_;
  Active active_;
  bool terminal_ = false;
  bool ascii_ = false;
  int64_t count_ = 0;
  int64_t drawn_count_ = -1;  // count at the last plain line
  Clock::time_point start_;
  Clock::time_point next_draw_;
  std::vector<std::pair<std::string, double>> postfix_;
  std::string postfix_text_;
};

namespace detail {
/// "05:03", "1:02:03": tqdm's format of elapsed and remaining time.
std::string format_interval(double seconds);
}  // namespace detail

}  // namespace acc
