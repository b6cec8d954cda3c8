#include <fstream>

#include <acc/errors.h>
#include <acc/tracking.h>

#include "tracking/log_file.h"
#include "tracking/value_format.h"

namespace acc {

JsonlTracker::JsonlTracker(std::string run_name, std::string logging_dir, double flush_secs)
    : FileTracker(std::move(run_name), std::move(logging_dir), flush_secs) {}

void JsonlTracker::start() {
  if (file() == nullptr) open("metrics.jsonl");
}

void JsonlTracker::store_init_configuration(const TrackerValues& config) {
  std::string json = "{";
  for (const auto& [name, value] : config) {
    if (json.size() > 1) json += ", ";
    json += detail::json_string(name) + ": " + detail::json_value(value);
  }
  json += "}\n";
  const std::string path = run_dir() + "/config.json";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json;
  if (!out) throw Error("acc: cannot write '" + path + "'; choose a writable logging_dir");
}

void JsonlTracker::log(const TrackerValues& values, std::optional<int64_t> step) {
  if (file() == nullptr) return;
  std::string line = "{\"step\": " + (step ? std::to_string(*step) : std::string("null")) +
                     ", \"wall_time\": " + detail::format_double(detail::unix_time());
  for (const auto& [name, value] : values) {
    line += ", " + detail::json_string(name) + ": " + detail::json_value(value);
  }
  line += "}\n";
  file()->write(line);
}

}  // namespace acc
