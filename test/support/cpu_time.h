#pragma once
// Complexity checks ("16x the input takes about 16x as long, not 256x") time the calling thread's
// CPU, not the wall clock: time the thread spends preempted by other processes on a busy machine
// (ctest -j, a build) is not counted, so the ratio does not depend on what else runs.
#include <time.h>

#include <algorithm>

namespace acc::testing {

inline double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// The least CPU time of `rounds` calls of `work` (the first call may touch fresh memory).
template <class Work>
double least_cpu_seconds(int rounds, Work&& work) {
  double least = 1e300;
  for (int round = 0; round < rounds; ++round) {
    const double start = thread_cpu_seconds();
    work();
    least = std::min(least, thread_cpu_seconds() - start);
  }
  return least;
}

}  // namespace acc::testing
