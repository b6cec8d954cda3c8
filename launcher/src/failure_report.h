#pragma once
// The report acc-launch prints on stderr when a rank of this machine failed. Its first line names the
// rank to blame: the rank that failed first, unless the failed ranks were waiting for another one, a rank
// of this machine found stopped (SIGSTOP, a debugger) when the first one failed, or the rank their errors
// name (one on another machine, say). Then each rank that failed on its own: how it ended, the acc error
// it raised, and the first one's last lines.
#include <string>
#include <vector>

#include "supervised_rank.h"

namespace acc::launcher {

struct FailureReportContext {
  std::string tool_name = "acc-launch";
  bool piped = true;         // the ranks' output went through acc-launch (else it is above, on the console)
  int local_world_size = 1;  // to tell which machine a rank of another machine runs on
};

// `first` is the rank that failed first (an element of `ranks`); every rank has ended.
std::string failure_report(const std::vector<SupervisedRank>& ranks, const SupervisedRank& first,
                           const FailureReportContext& context);

// Whether the rank ended with a failure of its own, not from the launcher stopping it after another
// rank's failure (a SIGTERM or SIGKILL of the launcher's).
bool failed_on_its_own(const SupervisedRank& rank);

// "rank 0 (local rank 0, pid 123) is stopped (SIGSTOP or a debugger)" / "ranks 0 (...), 2 (...) are
// stopped ...": the ranks found stopped, for the lines said as it happens; empty when none is.
std::string stopped_ranks_text(const std::vector<SupervisedRank>& ranks);

}  // namespace acc::launcher
