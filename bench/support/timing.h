#pragma once
// Timing helpers shared by the benchmarks: medians of interleaved runs resist machine noise.
#include <algorithm>
#include <chrono>
#include <vector>

namespace acc::bench {

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

/// Wall time of one call of `f`, in milliseconds.
template <typename F>
double time_ms(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace acc::bench
