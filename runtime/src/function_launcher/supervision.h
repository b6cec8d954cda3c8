#pragma once
// The caller side of acc::launch once the ranks run: acc-launch's supervision (launcher/src/
// supervisor.cpp) for forked children. A rank that fails makes the others get SIGTERM, then SIGKILL
// after the grace period; so do the job's deadline and SIGINT. Every child is reaped and its
// process group killed, whatever happens, exceptions included. Torch-free.
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "function_launcher/rank_report.h"
#include "function_launcher/signals.h"

namespace acc::detail {

using SteadyClock = std::chrono::steady_clock;

struct RankProcess {
  int rank = 0;
  pid_t pid = -1;
  int report_fd = -1;  // read end of the rank's pipe; -1 once drained
  bool running = true;
  /// waitpid's status; meaningful when status_known.
  int wait_status = 0;
  /// False when someone else in the program collected the status (a SIGCHLD handler that reaps
  /// every child): the report, if any, tells how `fn` ended.
  bool status_known = true;
  SteadyClock::time_point reaped;
  std::string report_bytes;
  std::optional<RankReport> report;  // once drained

  /// Whether this rank failed: `fn` threw, or it exited non-zero or from a signal.
  bool failed() const;
  /// When it failed, as well as can be told: when `fn` threw, else when it was reaped.
  SteadyClock::time_point failed_at() const;
  /// "threw "boom"", "exited with code 3", "was killed by signal 9 (SIGKILL)".
  std::string describe() const;
};

struct Outcome {
  /// The first rank that failed, when the job was stopped for it (ranks that die after the stop
  /// began are its consequence, not failures of their own).
  const RankProcess* failed = nullptr;
  bool timed_out = false;    // the job was stopped at its deadline
  bool interrupted = false;  // SIGINT arrived while waiting
  int stopped = 0;           // ranks still running when the stop began
  int failed_after = 0;      // other ranks that had failed too by then (a peer's collective breaks)
  bool success() const { return failed == nullptr && !timed_out && !interrupted; }
};

/// The running ranks of one call. The destructor kills and reaps whatever still runs, so an
/// exception on the caller's side (a fork that fails halfway) leaves nothing behind.
class RankSet {
 public:
  RankSet() = default;
  ~RankSet();
  RankSet(const RankSet&) = delete;
  RankSet& operator=(const RankSet&) = delete;

  void add(const RankProcess& rank) { ranks_.push_back(rank); }
  const std::vector<RankProcess>& ranks() const { return ranks_; }

  /// Waits until every rank has ended. `deadline`: the job's; `grace`: SIGTERM to SIGKILL;
  /// `interrupts`: installed before the first fork, so that no Ctrl-C is missed.
  Outcome supervise(std::chrono::milliseconds grace, std::optional<SteadyClock::time_point> deadline,
                    const InterruptScope& interrupts);

 private:
  void poll_reports(SteadyClock::duration max_wait);
  void reap_ended();
  void drain(RankProcess& rank);
  /// Reads what the rank's report pipe holds now; true at end of file.
  static bool read_report(RankProcess& rank);
  void signal_running(int sig);
  void kill_groups_and_reap();

  std::vector<RankProcess> ranks_;
};

/// Of the ranks that have ended and failed, the one that failed first (nullptr if none): others
/// may have failed because of it (their collective broke when it went) before the caller woke up
/// to reap them all at once, so the order of reaping does not tell, the ranks' own reports do.
const RankProcess* first_failure(const std::vector<RankProcess>& ranks);

/// The ranks whose `fn` returned before `failed` failed, earliest first: a rank that leaves while
/// its peers still run collectives makes them fail, and the one that noticed is not the one to
/// blame (acc-launch names them too).
std::vector<const RankProcess*> early_leavers(const std::vector<RankProcess>& ranks, const RankProcess& failed);

}  // namespace acc::detail
