#pragma once
// The checks of a rank program started by spawn_ranks: a failed check prints "FAIL: ..." (what
// the parent test looks for) and exits 1, so the parent sees which rank failed and why.
#include <cstdlib>
#include <iostream>
#include <string>

namespace acc::testing {

// Prints the failure and returns the exit status, for `return failed(...)` where the caller's locals
// (an Accelerator, a store its peers still read) must be destroyed before the process ends.
[[nodiscard]] inline int failed(const std::string& message) {
  std::cout << "FAIL: " << message << std::endl;
  return 1;
}

[[noreturn]] inline void fail(const std::string& message) { std::exit(failed(message)); }

inline void expect(bool condition, const std::string& message) {
  if (!condition) fail(message);
}

}  // namespace acc::testing
