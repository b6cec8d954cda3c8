#include "rank_output.h"

#include <unistd.h>

#include <cerrno>

namespace acc::launcher {
namespace {
// A rank that prints without newlines (progress bars) must not grow the buffer without bound.
constexpr size_t kMaxLine = 64 * 1024;
}  // namespace

void LineHistory::add(std::string_view line) {
  if (capacity_ == 0) return;
  if (lines_.size() == capacity_) lines_.pop_front();
  lines_.emplace_back(line);
}

void write_all(int fd, std::string_view text) {
  while (fd >= 0 && !text.empty()) {
    const ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return;
    }
    text.remove_prefix(static_cast<size_t>(written));
  }
}

RankStream::RankStream(std::string prefix, int console_fd, int log_fd, LineHistory* history)
    : prefix_(std::move(prefix)), console_fd_(console_fd), log_fd_(log_fd), history_(history) {}

void RankStream::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(bytes);
      if (pending_.size() >= kMaxLine) {
        emit(pending_);
        pending_.clear();
      }
      return;
    }
    if (pending_.empty()) {
      emit(bytes.substr(0, newline));
    } else {
      pending_.append(bytes.substr(0, newline));
      emit(pending_);
      pending_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

void RankStream::finish() {
  if (!pending_.empty()) emit(pending_);
  pending_.clear();
}

void RankStream::emit(std::string_view line) {
  if (history_) history_->add(line);
  std::string text;
  text.reserve(prefix_.size() + line.size() + 1);
  text.append(prefix_).append(line).push_back('\n');
  write_all(console_fd_, text);
  write_all(log_fd_, std::string_view(text).substr(prefix_.size()));
}

}  // namespace acc::launcher
