#pragma once
// The trackers of one Accelerator (log_with), created by init_trackers. Only the main process
// creates acc's file trackers; the others hold none and log() costs them one branch.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <acc/tracker.h>

namespace acc::detail {

class TrackerSet {
 public:
  /// Validates the names in `log_with` (throws ConfigError naming the choices) and that acc's
  /// file trackers have a logging directory.
  TrackerSet(const LogWith& log_with, bool is_main_process, std::string logging_dir);

  bool requested() const { return !names_.empty() || !user_.empty(); }
  void init(const std::string& project_name, const TrackerValues& config);
  void log(const TrackerValues& values, std::optional<int64_t> step);
  GeneralTracker& get(const std::string& name);
  /// Finishes every tracker once (end_training); later log() calls are dropped.
  void finish();

 private:
  std::vector<std::string> names_;                      // acc's trackers, lower case, unique
  std::vector<std::shared_ptr<GeneralTracker>> user_;   // passed in log_with
  std::vector<std::shared_ptr<GeneralTracker>> active_;  // on this process, after init
  std::string logging_dir_;
  bool main_;
  bool initialized_ = false;
  bool finished_ = false;
  bool reserved_names_ = false;  // JSONL/CSV use "step" and "wall_time" themselves
};

}  // namespace acc::detail
