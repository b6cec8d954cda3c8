#include "tracking/log_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <acc/errors.h>

namespace acc::detail {

void create_directories(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    throw Error("acc: cannot create the logging directory '" + dir + "': " + error.message() +
                "; choose a writable logging_dir");
  }
}

LogFile::LogFile(std::string path, double flush_secs) : path_(std::move(path)) {
  const auto parent = std::filesystem::path(path_).parent_path();
  if (!parent.empty()) create_directories(parent.string());
  open_locked();
  flusher_ = std::thread([this, flush_secs] { flush_loop(flush_secs); });
}

LogFile::~LogFile() { close(); }

void LogFile::open_locked() {
  // O_NOFOLLOW: a link planted at the log's name fails here instead of receiving the log.
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  file_ = fd < 0 ? nullptr : ::fdopen(fd, "ab");
  if (file_ == nullptr && fd >= 0) ::close(fd);
  if (file_ == nullptr) {
    throw Error("acc: cannot open the log file '" + path_ + "': " + std::strerror(errno) +
                "; choose a writable logging_dir");
  }
}

void LogFile::close_locked() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  dirty_ = false;
}

void LogFile::write(std::string_view data) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return;  // closed by end_training: later logs are dropped
  std::fwrite(data.data(), 1, data.size(), file_);
  dirty_ = true;
}

void LogFile::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ != nullptr && dirty_) std::fflush(file_);
  dirty_ = false;
}

void LogFile::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    close_locked();
  }
  wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
}

void LogFile::flush_loop(double flush_secs) {
  const auto interval = std::chrono::duration<double>(flush_secs);
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, interval, [this] { return stopping_; });
    if (file_ != nullptr && dirty_) std::fflush(file_);
    dirty_ = false;
  }
}

}  // namespace acc::detail
