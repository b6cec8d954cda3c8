#include <unistd.h>

#include <atomic>
#include <cmath>

#include <acc/tracking.h>

#include "tracking/log_file.h"
#include "tracking/tensorboard_events.h"
#include "tracking/value_format.h"

namespace acc {

namespace {
// TensorBoard finds event files by "tfevents" in the name; the rest keeps names unique, as
// TensorFlow's writer does: time, host, process, and a counter within the process.
std::string event_file_name() {
  static std::atomic<int> counter{0};
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  return "events.out.tfevents." + std::to_string(static_cast<int64_t>(detail::unix_time())) +
         "." + host + "." + std::to_string(getpid()) + "." + std::to_string(counter++);
}

// The config as a Markdown table for the text dashboard.
std::string config_table(const TrackerValues& config) {
  std::string table = "| name | value |\n|---|---|\n";
  for (const auto& [name, value] : config) {
    table += "| " + name + " | " +
             (value.is_string() ? value.string() : detail::json_value(value)) + " |\n";
  }
  return table;
}
}  // namespace

TensorBoardTracker::TensorBoardTracker(std::string run_name, std::string logging_dir,
                                       double flush_secs)
    : FileTracker(std::move(run_name), std::move(logging_dir), flush_secs) {}

void TensorBoardTracker::start() {
  if (file() != nullptr) return;
  auto& file = open(event_file_name());
  event_file_ = file.path();
  file.write(detail::tensorboard::tfrecord(detail::tensorboard::file_version_event(
      detail::unix_time())));
  file.flush();  // an empty run shows up in TensorBoard at once
}

void TensorBoardTracker::store_init_configuration(const TrackerValues& config) {
  if (file() == nullptr) return;
  const double now = detail::unix_time();
  file()->write(detail::tensorboard::tfrecord(detail::tensorboard::hparams_event(config, now)));
  file()->write(detail::tensorboard::tfrecord(
      detail::tensorboard::text_event("config", config_table(config), 0, now)));
  file()->flush();
}

void TensorBoardTracker::log(const TrackerValues& values, std::optional<int64_t> step) {
  if (file() == nullptr) return;
  const double now = detail::unix_time();
  const int64_t at = step.value_or(0);
  std::string records;
  for (const auto& [tag, value] : values) {
    records += detail::tensorboard::tfrecord(
        value.is_string()
            ? detail::tensorboard::text_event(tag, value.string(), at, now)
            : detail::tensorboard::scalar_event(tag, static_cast<float>(value.number()), at, now));
  }
  file()->write(records);
}

}  // namespace acc
