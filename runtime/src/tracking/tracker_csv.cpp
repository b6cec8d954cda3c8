#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <acc/errors.h>
#include <acc/tracking.h>
#include <acc_common/new_file.h>

#include "tracking/log_file.h"
#include "tracking/value_format.h"

namespace acc {

namespace {
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A new file under a random name renamed over `path` (acc_common/new_file.h): a link planted at
// the name, or at a predictable temporary, never redirects the write.
void write_file(const std::string& path, const std::string& contents) {
  const std::string error = common::replace_file(path, contents);
  if (!error.empty()) throw Error("acc: " + error + "; choose a writable logging_dir");
}
}  // namespace

CsvTracker::CsvTracker(std::string run_name, std::string logging_dir, double flush_secs)
    : FileTracker(std::move(run_name), std::move(logging_dir), flush_secs) {}

void CsvTracker::start() {
  if (file() != nullptr) return;
  auto& file = open("metrics.csv");
  // Continue the columns of an existing file (a resumed run); a new one gets its header here.
  const std::string existing = read_file(file.path());
  if (existing.empty()) {
    const std::string header = "step,wall_time\n";
    file.write(header);
    header_bytes_ = header.size();
    return;
  }
  const auto fields = detail::parse_csv_record(existing, header_bytes_);
  if (fields.size() < 2 || fields[0] != "step" || fields[1] != "wall_time") {
    throw Error("acc: '" + file.path() + "' exists and is not a metrics file of acc (its header "
                "does not start with step,wall_time); move it away or choose another project name");
  }
  columns_.assign(fields.begin() + 2, fields.end());
}

void CsvTracker::store_init_configuration(const TrackerValues& config) {
  std::string csv = "name,value\n";
  for (const auto& [name, value] : config) {
    csv += detail::csv_field(name) + "," + detail::csv_value(value) + "\n";
  }
  write_file(run_dir() + "/config.csv", csv);
}

void CsvTracker::grow_header(const TrackerValues& values) {
  bool grew = false;
  for (const auto& entry : values) {
    if (std::find(columns_.begin(), columns_.end(), entry.first) == columns_.end()) {
      columns_.push_back(entry.first);
      grew = true;
    }
  }
  if (!grew) return;
  std::string header = "step,wall_time";
  for (const auto& column : columns_) header += "," + detail::csv_field(column);
  header += "\n";
  // Rare (once per new metric name): rewrite the file with the longer header, atomically.
  file()->reopen_after([&] {
    const std::string& path = file()->path();
    const std::string rows = read_file(path).substr(header_bytes_);
    write_file(path, header + rows);
  });
  header_bytes_ = header.size();
}

void CsvTracker::log(const TrackerValues& values, std::optional<int64_t> step) {
  if (file() == nullptr) return;
  grow_header(values);
  std::string row = (step ? std::to_string(*step) : std::string()) + "," +
                    detail::format_double(detail::unix_time());
  for (const auto& column : columns_) {
    row += ",";
    const auto it = values.find(column);
    if (it != values.end()) row += detail::csv_value(it->second);
  }
  row += "\n";
  file()->write(row);
}

}  // namespace acc
