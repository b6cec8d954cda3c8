#pragma once
// The checks of a rank program started by spawn_ranks: a failed check prints "FAIL: ..." (what
// the parent test looks for) and exits 1, so the parent sees which rank failed and why.
#include <cstdlib>
#include <iostream>
#include <string>

namespace acc::testing {

[[noreturn]] inline void fail(const std::string& message) {
  std::cout << "FAIL: " << message << std::endl;
  std::exit(1);
}

inline void expect(bool condition, const std::string& message) {
  if (!condition) fail(message);
}

}  // namespace acc::testing
