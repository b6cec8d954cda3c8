#include "function_launcher/supervision.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <acc_common/child_process.h>
#include <acc_common/process_status.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace acc::detail {
namespace {
// The longest sleep between checks of exits, deadlines and SIGINT. A rank's exit usually wakes the
// wait at once: its pipe closes.
constexpr auto kPollInterval = std::chrono::milliseconds(50);
}  // namespace

bool RankProcess::failed() const {
  if (report && report->threw) return true;
  if (!status_known) return !report;
  return common::wait_status_failed(wait_status);
}

SteadyClock::time_point RankProcess::failed_at() const { return report && report->threw ? report->ended : reaped; }

std::string RankProcess::describe() const {
  if (report && report->threw) return "threw \"" + report->error + "\"";
  if (!status_known) {
    return "ended without reporting, and its exit status was collected by someone else in this "
           "program (a SIGCHLD handler that reaps every child?)";
  }
  return common::describe_wait_status(wait_status);
}

const RankProcess* first_failure(const std::vector<RankProcess>& ranks) {
  const RankProcess* first = nullptr;
  for (const RankProcess& rank : ranks) {
    if (!rank.running && rank.failed() && (!first || rank.failed_at() < first->failed_at())) first = &rank;
  }
  return first;
}

std::vector<const RankProcess*> early_leavers(const std::vector<RankProcess>& ranks, const RankProcess& failed) {
  std::vector<const RankProcess*> leavers;
  for (const RankProcess& rank : ranks) {
    // Returned: its report says so (its exit status alone would also fit std::exit(0)).
    if (&rank == &failed || rank.running || rank.failed() || !rank.report || rank.report->threw) continue;
    if (rank.report->ended < failed.failed_at()) leavers.push_back(&rank);
  }
  std::sort(leavers.begin(), leavers.end(),
            [](const RankProcess* a, const RankProcess* b) { return a->report->ended < b->report->ended; });
  return leavers;
}

RankSet::~RankSet() { kill_groups_and_reap(); }

Outcome RankSet::supervise(std::chrono::milliseconds grace, std::optional<SteadyClock::time_point> deadline,
                           const InterruptScope& interrupts) {
  Outcome outcome;
  bool stopping = false;
  auto kill_at = SteadyClock::time_point::max();  // max: no SIGKILL pending
  int interrupts_seen = 0;
  auto any_running = [this] { return std::any_of(ranks_.begin(), ranks_.end(), [](auto& r) { return r.running; }); };
  auto stop = [&] {
    stopping = true;
    outcome.stopped = static_cast<int>(std::count_if(ranks_.begin(), ranks_.end(), [](auto& r) { return r.running; }));
    signal_running(SIGTERM);
    kill_at = SteadyClock::now() + grace;
  };

  while (any_running()) {
    auto wait = SteadyClock::duration(kPollInterval);
    if (kill_at != SteadyClock::time_point::max()) wait = std::min(wait, kill_at - SteadyClock::now());
    if (deadline && !stopping) wait = std::min(wait, *deadline - SteadyClock::now());
    poll_reports(std::max(wait, SteadyClock::duration::zero()));
    reap_ended();

    if (!stopping) {
      outcome.failed = first_failure(ranks_);
      if (outcome.failed) {
        outcome.failed_after = static_cast<int>(std::count_if(
            ranks_.begin(), ranks_.end(), [&](auto& r) { return !r.running && r.failed() && &r != outcome.failed; }));
        stop();
      }
    }
    if (const int seen = interrupts.count(); seen > interrupts_seen) {
      // The first SIGINT stops the ranks gracefully, a second one (or one during a stop) at once.
      if (!stopping) {
        outcome.interrupted = true;
        stop();
      } else {
        outcome.interrupted = true;
        signal_running(SIGKILL);
      }
      interrupts_seen = seen;
    }
    if (!stopping && deadline && SteadyClock::now() >= *deadline && any_running()) {
      outcome.timed_out = true;
      stop();
    }
    if (SteadyClock::now() >= kill_at) {
      signal_running(SIGKILL);
      kill_at = SteadyClock::time_point::max();
    }
  }
  kill_groups_and_reap();
  return outcome;
}

void RankSet::poll_reports(SteadyClock::duration max_wait) {
  std::vector<pollfd> fds;
  std::vector<RankProcess*> owners;
  for (RankProcess& rank : ranks_) {
    if (rank.report_fd >= 0) {
      fds.push_back({rank.report_fd, POLLIN, 0});
      owners.push_back(&rank);
    }
  }
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(max_wait).count();
  // EINTR (a SIGINT) just ends the wait early.
  if (::poll(fds.data(), fds.size(), static_cast<int>(ms)) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    RankProcess& rank = *owners[i];
    if (read_report(rank)) {  // every writer is gone: the rank has ended (or is ending)
      ::close(rank.report_fd);
      rank.report_fd = -1;
    }
  }
}

bool RankSet::read_report(RankProcess& rank) {
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(rank.report_fd, buffer, sizeof(buffer));
    if (got > 0) {
      if (rank.report_bytes.size() < 2 * kMaxReportedError) rank.report_bytes.append(buffer, static_cast<size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    return got == 0;  // else EAGAIN: nothing more for now
  }
}

void RankSet::reap_ended() {
  for (RankProcess& rank : ranks_) {
    if (!rank.running) continue;
    int status = 0;
    const pid_t got = ::waitpid(rank.pid, &status, WNOHANG);
    if (got == 0 || (got < 0 && errno == EINTR)) continue;
    rank.running = false;
    rank.reaped = SteadyClock::now();
    if (got == rank.pid) {
      rank.wait_status = status;
    } else {
      rank.status_known = false;  // ECHILD: reaped by someone else
    }
    drain(rank);
  }
}

void RankSet::drain(RankProcess& rank) {
  if (rank.report_fd >= 0) {
    // EOF, or EAGAIN: a descendant of the rank may hold the pipe, but the rank wrote all it will.
    read_report(rank);
    ::close(rank.report_fd);
    rank.report_fd = -1;
  }
  rank.report = decode_report(rank.report_bytes);
}

void RankSet::signal_running(int sig) {
  for (RankProcess& rank : ranks_) {
    if (!rank.running) continue;
    common::signal_rank_group(rank.pid, sig);  // the rank and what it started
  }
}

void RankSet::kill_groups_and_reap() {
  for (RankProcess& rank : ranks_) {
    // Descendants the rank left behind are killed too (no orphans). A group id can only be reused
    // once the group is empty, and an empty group makes kill() fail harmlessly with ESRCH.
    ::kill(-rank.pid, SIGKILL);
    if (rank.running) {
      ::kill(rank.pid, SIGKILL);
      int status = 0;
      pid_t got;
      do {
        got = ::waitpid(rank.pid, &status, 0);
      } while (got < 0 && errno == EINTR);
      rank.running = false;
      rank.reaped = SteadyClock::now();
      rank.wait_status = status;
      rank.status_known = got == rank.pid;
    }
    if (rank.report_fd >= 0) {
      ::close(rank.report_fd);
      rank.report_fd = -1;
    }
  }
}

}  // namespace acc::detail
