#pragma once
// An append-only log file shared by acc's trackers: buffered writes (no system call per log
// call), flushed by a background thread every `flush_secs` so that a crash loses at most the
// last interval, and on flush()/close()/destruction.
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace acc::detail {

class LogFile {
 public:
  /// Opens `path` for appending (creating its directory); throws acc::Error naming the path.
  LogFile(std::string path, double flush_secs);
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  void write(std::string_view data);
  void flush();
  void close();
  /// Runs `edit` with the file closed and flushed (to rewrite it), then reopens it for appending.
  template <typename Edit>
  void reopen_after(Edit&& edit) {
    std::lock_guard<std::mutex> lock(mutex_);
    close_locked();
    edit();
    open_locked();
  }
  const std::string& path() const { return path_; }

 private:
  void open_locked();
  void close_locked();
  void flush_loop(double flush_secs);

  std::string path_;
  std::FILE* file_ = nullptr;
  bool dirty_ = false;
  bool stopping_ = false;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread flusher_;
};

/// Creates `dir` and its parents; throws acc::Error naming the directory and the reason.
void create_directories(const std::string& dir);

}  // namespace acc::detail
