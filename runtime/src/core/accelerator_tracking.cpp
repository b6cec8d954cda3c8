// The Accelerator's tracking and progress methods (Accelerate's init_trackers, log,
// get_tracker), delegating to detail::TrackerSet and acc::ProgressBar.
#include <acc/accelerator.h>

#include "tracking/tracker_set.h"

namespace acc {

void Accelerator::init_trackers(const std::string& project_name, const TrackerValues& config) {
  trackers_->init(project_name, config);
}

void Accelerator::log(const TrackerValues& values, std::optional<int64_t> step) {
  trackers_->log(values, step);
}

GeneralTracker& Accelerator::get_tracker(const std::string& name) { return trackers_->get(name); }

std::string Accelerator::logging_dir() const {
  return project_.logging_dir().empty() ? project_.project_dir() : project_.logging_dir();
}

ProgressBar Accelerator::progress_bar(int64_t total, std::string description) const {
  return progress_bar(ProgressBarOptions().total(total).description(std::move(description)));
}

ProgressBar Accelerator::progress_bar(ProgressBarOptions options) const {
  if (!is_local_main_process()) options.disable(true);
  return ProgressBar(std::move(options));
}

}  // namespace acc
