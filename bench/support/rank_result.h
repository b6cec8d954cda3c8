#pragma once
// The benchmarks that measure ranks start this same program on every rank (spawn_ranks) and read
// the line rank 0 printed as "RESULT <fields...>".
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "spawn.h"

namespace acc::bench {

/// Runs `/proc/self/exe args...` on `ranks` ranks; exits the benchmark with every rank's output if
/// one failed. Returns rank 0's fields after "RESULT ".
inline std::istringstream rank0_result(const std::vector<std::string>& args, int ranks,
                                       std::chrono::minutes timeout) {
  auto result = acc::testing::spawn_ranks("/proc/self/exe", args, ranks, timeout);
  const auto& output = result.ranks.empty() ? std::string() : result.ranks[0].output;
  const auto at = output.find("RESULT ");
  if (!result.all_succeeded() || at == std::string::npos) {
    std::fputs(result.describe().c_str(), stderr);
    std::exit(1);
  }
  return std::istringstream(output.substr(at + 7));
}

}  // namespace acc::bench
