#pragma once
// acc's own trackers (torch-free), written only on the main process by Accelerator::log:
//   TensorBoardTracker  <logging_dir>/<project>/events.out.tfevents.*  (read by TensorBoard)
//   JsonlTracker        <logging_dir>/<project>/metrics.jsonl + config.json
//   CsvTracker          <logging_dir>/<project>/metrics.csv + config.csv
// Each buffers writes and flushes every `flush_secs` (background thread), at finish() and on
// destruction, so that a crash loses at most the last interval. Construct one yourself to
// change flush_secs and pass it in AcceleratorOptions::log_with.
#include <memory>
#include <string>
#include <vector>

#include <acc/tracker.h>

namespace acc {

namespace detail {
class LogFile;
}

inline constexpr double kDefaultFlushSecs = 5.0;

/// Base of acc's file trackers: a run directory <logging_dir>/<run_name>, created by start().
class FileTracker : public GeneralTracker {
 public:
  FileTracker(std::string run_name, std::string logging_dir, double flush_secs);
  ~FileTracker() override;
  const std::string& run_dir() const { return run_dir_; }
  /// Writes buffered records to the operating system now.
  void flush();
  void finish() override;

 protected:
  /// Opens (appending) <run_dir>/<file_name>; valid until finish().
  detail::LogFile& open(const std::string& file_name);
  detail::LogFile* file() const { return file_.get(); }
  double flush_secs() const { return flush_secs_; }

 private:
  std::string run_dir_;
  double flush_secs_;
  std::unique_ptr<detail::LogFile> file_;
};

/// TensorBoard event files written by acc (TFRecord + hand-encoded protobuf; no Python needed).
/// Numbers become scalars (float32, as TensorBoard stores them), strings text; the config
/// becomes hparams and a "config" text table. A log without step is at step 0, as in Accelerate.
class TensorBoardTracker : public FileTracker {
 public:
  TensorBoardTracker(std::string run_name, std::string logging_dir,
                     double flush_secs = kDefaultFlushSecs);
  std::string name() const override { return "tensorboard"; }
  void start() override;
  void store_init_configuration(const TrackerValues& config) override;
  void log(const TrackerValues& values, std::optional<int64_t> step) override;
  /// The event file (empty before start()).
  const std::string& event_file() const { return event_file_; }

 private:
  std::string event_file_;
};

/// One JSON object per log call: {"step": N or null, "wall_time": unix seconds, name: value...}.
/// Non-finite numbers are written as null (JSON has no NaN). The config goes to config.json.
/// Appends to an existing metrics.jsonl (a resumed run continues its log).
class JsonlTracker : public FileTracker {
 public:
  JsonlTracker(std::string run_name, std::string logging_dir,
               double flush_secs = kDefaultFlushSecs);
  std::string name() const override { return "jsonl"; }
  void start() override;
  void store_init_configuration(const TrackerValues& config) override;
  void log(const TrackerValues& values, std::optional<int64_t> step) override;
};

/// One CSV file, columns step, wall_time, then every name in order of first appearance. When a
/// log call brings a new name, the header is rewritten with the new column appended (earlier
/// rows stay shorter: CSV readers such as pandas and Python's csv fill them as missing).
/// The config goes to config.csv (name,value). Continues an existing metrics.csv.
class CsvTracker : public FileTracker {
 public:
  CsvTracker(std::string run_name, std::string logging_dir,
             double flush_secs = kDefaultFlushSecs);
  std::string name() const override { return "csv"; }
  void start() override;
  void store_init_configuration(const TrackerValues& config) override;
  void log(const TrackerValues& values, std::optional<int64_t> step) override;
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  void grow_header(const TrackerValues& values);
  std::vector<std::string> columns_;  // after step and wall_time
  size_t header_bytes_ = 0;           // length of the header line in the file, newline included
};

/// The names "all" stands for, in the order trackers are created.
const std::vector<std::string>& builtin_tracker_names();

}  // namespace acc
