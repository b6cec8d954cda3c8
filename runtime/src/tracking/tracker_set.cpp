#include "tracking/tracker_set.h"

#include <algorithm>
#include <cctype>

#include <acc/errors.h>
#include <acc/tracking.h>

namespace acc::detail {

namespace {
std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

void add_unique(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

std::string joined_names(const std::vector<std::string>& names,
                         const std::vector<std::shared_ptr<GeneralTracker>>& user) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  for (const auto& tracker : user) out += (out.empty() ? "" : ", ") + tracker->name();
  return out.empty() ? "none" : out;
}

// What get_tracker returns on a process where the tracker does not run (Accelerate returns a
// blank GeneralTracker there): every call does nothing.
class NullTracker final : public GeneralTracker {
 public:
  std::string name() const override { return ""; }
  void log(const TrackerValues&, std::optional<int64_t>) override {}
};
}  // namespace

TrackerSet::TrackerSet(const LogWith& log_with, bool is_main_process, std::string logging_dir)
    : user_(log_with.trackers()), logging_dir_(std::move(logging_dir)), main_(is_main_process) {
  for (const auto& raw : log_with.names()) {
    const std::string name = lower(raw);
    if (name == "all") {
      for (const auto& builtin : builtin_tracker_names()) add_unique(names_, builtin);
    } else if (std::find(builtin_tracker_names().begin(), builtin_tracker_names().end(), name) !=
               builtin_tracker_names().end()) {
      add_unique(names_, name);
    } else {
      throw ConfigError("acc: unknown tracker '" + raw +
                        "' in log_with; use \"tensorboard\", \"jsonl\", \"csv\" or \"all\", or "
                        "pass your own acc::GeneralTracker as a std::shared_ptr");
    }
  }
  for (const auto& tracker : user_) {
    if (tracker == nullptr) throw ConfigError("acc: log_with got a null tracker pointer");
  }
  if (!names_.empty() && logging_dir_.empty()) {
    throw ConfigError("acc: logging with \"" + names_.front() + "\" needs a logging directory; pass "
                      "AcceleratorOptions().project_config(acc::ProjectConfiguration()"
                      ".project_dir(\"runs\")) (or .logging_dir(...))");
  }
  reserved_names_ = std::any_of(names_.begin(), names_.end(),
                                [](const std::string& n) { return n == "jsonl" || n == "csv"; });
}

void TrackerSet::init(const std::string& project_name, const TrackerValues& config) {
  if (initialized_) {
    throw ConfigError("acc: init_trackers was called twice; call it once, before training");
  }
  if (project_name.empty() || project_name.find('/') != std::string::npos ||
      project_name == "." || project_name == "..") {
    throw ConfigError("acc: init_trackers needs a project name usable as a directory name (got '" +
                      project_name + "'); pass e.g. \"my_project\"");
  }
  initialized_ = true;
  if (main_) {
    for (const auto& name : names_) {
      if (name == "tensorboard") {
        active_.push_back(std::make_shared<TensorBoardTracker>(project_name, logging_dir_));
      } else if (name == "jsonl") {
        active_.push_back(std::make_shared<JsonlTracker>(project_name, logging_dir_));
      } else {
        active_.push_back(std::make_shared<CsvTracker>(project_name, logging_dir_));
      }
    }
  }
  for (const auto& tracker : user_) {
    if (main_ || !tracker->main_process_only()) active_.push_back(tracker);
  }
  for (const auto& tracker : active_) tracker->start();
  if (!config.empty()) {
    for (const auto& tracker : active_) tracker->store_init_configuration(config);
  }
}

void TrackerSet::log(const TrackerValues& values, std::optional<int64_t> step) {
  if (!initialized_) {
    if (!requested()) return;  // as Accelerate: no trackers, nothing to do
    throw ConfigError("acc: log() was called before init_trackers(); call "
                      "accelerator.init_trackers(\"project_name\") once before training");
  }
  // Checked on every process, so that a bad name fails everywhere instead of only on the main.
  for (const auto& entry : values) {
    if (entry.first.empty()) throw ConfigError("acc: log() got a value with an empty name");
    if (reserved_names_ && (entry.first == "step" || entry.first == "wall_time")) {
      throw ConfigError("acc: log() got a value named '" + entry.first +
                        "', which the jsonl and csv trackers write themselves; rename it "
                        "(e.g. 'train_" + entry.first + "') or pass the step as log's argument");
    }
  }
  for (const auto& tracker : active_) tracker->log(values, step);
}

GeneralTracker& TrackerSet::get(const std::string& name) {
  if (!initialized_) {
    throw ConfigError("acc: get_tracker(\"" + name + "\") was called before init_trackers()");
  }
  for (const auto& tracker : active_) {
    if (tracker->name() == name) return *tracker;
  }
  const bool known =
      std::find(names_.begin(), names_.end(), name) != names_.end() ||
      std::any_of(user_.begin(), user_.end(), [&](const auto& t) { return t->name() == name; });
  if (known) {
    static NullTracker null_tracker;  // this process is not the main one
    return null_tracker;
  }
  throw ConfigError("acc: no tracker named '" + name + "'; the trackers in use are " +
                    joined_names(names_, user_) + " (set them with AcceleratorOptions().log_with)");
}

void TrackerSet::finish() {
  if (finished_) return;
  finished_ = true;
  for (const auto& tracker : active_) tracker->finish();
}

}  // namespace acc::detail

