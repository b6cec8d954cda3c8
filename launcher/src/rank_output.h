#pragma once
// Output of the ranks: their byte streams become whole lines, each written to the console with one
// write() (so lines of different ranks never mix), prefixed with the rank when several run, optionally
// copied to per-rank log files; the last lines of each rank are kept for the failure report.
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace acc::launcher {

// The last lines a rank printed on either stream, oldest first.
class LineHistory {
 public:
  explicit LineHistory(size_t capacity) : capacity_(capacity) {}
  void add(std::string_view line);
  const std::deque<std::string>& lines() const { return lines_; }

 private:
  size_t capacity_;
  std::deque<std::string> lines_;
};

class RankStream {
 public:
  // console_fd and log_fd may be -1 (not written). The stream does not own them.
  RankStream(std::string prefix, int console_fd, int log_fd, LineHistory* history);
  void feed(std::string_view bytes);
  // End of stream: a last line without a newline is still passed on.
  void finish();

 private:
  void emit(std::string_view line);

  std::string prefix_;
  int console_fd_;
  int log_fd_;
  LineHistory* history_;
  std::string pending_;
};

// Writes all of `text`, retrying short writes and EINTR; errors (a closed console) are ignored because a
// rank must never die from the launcher's output failing.
void write_all(int fd, std::string_view text);

}  // namespace acc::launcher
