#pragma once
// One rank of an attempt as the supervisor keeps it: its process, its output streams, how it ended, and
// what the failure report needs to know of it.
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>

#include "rank_output.h"
#include "stopped_process.h"

namespace acc::launcher {

using Clock = std::chrono::steady_clock;

struct RankOutputStream {
  int fd = -1;  // read end of the rank's pipe; -1 once closed
  int log_fd = -1;
  std::unique_ptr<RankStream> sink;
};

struct SupervisedRank {
  static constexpr size_t kHistoryLines = 20;
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  bool signalled = false;  // the launcher sent it SIGTERM or SIGKILL (after a failure, an interrupt)
  int wait_status = 0;
  Clock::time_point started;
  Clock::time_point ended;
  LineHistory history{kHistoryLines};
  RankOutputStream streams[2];            // stdout, stderr
  std::optional<StoppedProcess> stopped;  // stopped when the first rank failed
};

}  // namespace acc::launcher
