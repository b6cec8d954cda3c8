// TrackerValue, LogWith and the base of acc's file trackers.
#include <acc/errors.h>
#include <acc/tracking.h>

#include "tracking/log_file.h"

namespace acc {

double TrackerValue::number() const {
  return std::visit(
      [](const auto& v) -> double {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          throw ConfigError("acc: tracker value '" + v + "' is a string, not a number");
        } else {
          return static_cast<double>(v);
        }
      },
      value_);
}

LogWith::LogWith(std::initializer_list<LogWith> items) {
  for (const auto& item : items) {
    names_.insert(names_.end(), item.names_.begin(), item.names_.end());
    trackers_.insert(trackers_.end(), item.trackers_.begin(), item.trackers_.end());
  }
}

const std::vector<std::string>& builtin_tracker_names() {
  static const std::vector<std::string> names{"tensorboard", "jsonl", "csv"};
  return names;
}

FileTracker::FileTracker(std::string run_name, std::string logging_dir, double flush_secs)
    : run_dir_(logging_dir.empty() ? run_name : logging_dir + "/" + run_name),
      flush_secs_(flush_secs) {
  if (!(flush_secs > 0)) {
    throw ConfigError("acc: flush_secs must be positive (got " + std::to_string(flush_secs) +
                      ")");
  }
}

FileTracker::~FileTracker() = default;

detail::LogFile& FileTracker::open(const std::string& file_name) {
  file_ = std::make_unique<detail::LogFile>(run_dir_ + "/" + file_name, flush_secs_);
  return *file_;
}

void FileTracker::flush() {
  if (file_) file_->flush();
}

void FileTracker::finish() { file_.reset(); }  // closing flushes; later logs are dropped

}  // namespace acc
