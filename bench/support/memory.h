#pragma once
// Memory measures shared by the benchmarks.
#include <fstream>
#include <string>

namespace acc::bench {

/// A kB field of /proc/self/status ("VmRSS", "VmHWM", "RssAnon") in MiB; -1 when it is absent.
inline double status_mib(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;
  }
  return -1;
}

/// The process's resident-set high-water mark (VmHWM), in MiB; -1 when /proc does not say.
inline double peak_rss_mb() { return status_mib("VmHWM"); }

}  // namespace acc::bench
