#pragma once
// Memory measures shared by the benchmarks.
#include <fstream>
#include <string>

namespace acc::bench {

/// The process's resident-set high-water mark (VmHWM), in MiB; -1 when /proc does not say.
inline double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1;
}

}  // namespace acc::bench
