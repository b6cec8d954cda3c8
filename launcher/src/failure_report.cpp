#include "failure_report.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include <acc_common/process_status.h>

#include "blame.h"

namespace acc::launcher {
namespace {

std::string seconds_text(Clock::duration duration) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", std::chrono::duration<double>(duration).count());
  return text;
}

// "rank 1" / "ranks 1, 2".
std::string ranks_text(const std::vector<int>& ranks) {
  std::string text = ranks.size() > 1 ? "ranks " : "rank ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

std::string identity(const SupervisedRank& rank) {
  return std::to_string(rank.rank) + " (local rank " + std::to_string(rank.local_rank) + ", pid " +
         std::to_string(rank.pid) + ")";
}

bool ended_successfully_before(const SupervisedRank& rank, const SupervisedRank& first) {
  return !rank.running && !common::wait_status_failed(rank.wait_status) && rank.ended <= first.ended;
}

// The rank to blame, when it is not the one that failed first.
struct Culprit {
  std::vector<const SupervisedRank*> stopped;  // ranks of this machine found stopped
  int rank = -1;                               // else: the rank the failed ranks' errors name
  std::vector<int> accusers;                   // the ranks whose errors name it
  std::string reason;                          // what their errors say of it
};

std::optional<Culprit> find_culprit(const std::vector<SupervisedRank>& ranks, const SupervisedRank& first) {
  std::map<int, std::vector<int>> accusers_of;  // accused rank -> ranks whose errors name it
  std::map<int, std::string> reasons;
  for (const SupervisedRank& rank : ranks) {
    const auto accusation = last_accusation(rank.history.lines());
    if (!accusation) continue;
    for (int accused : accusation->accused) {
      accusers_of[accused].push_back(rank.rank);
      reasons.emplace(accused, accusation->reason);
    }
  }
  Culprit culprit;
  for (const SupervisedRank& rank : ranks)
    if (rank.stopped) culprit.stopped.push_back(&rank);
  if (!culprit.stopped.empty()) {
    // A stopped rank explains its peers' failures whether or not their errors could name it.
    for (const SupervisedRank* stopped : culprit.stopped)
      for (int accuser : accusers_of[stopped->rank]) culprit.accusers.push_back(accuser);
    if (culprit.accusers.empty())
      for (const SupervisedRank& rank : ranks)
        if (failed_on_its_own(rank)) culprit.accusers.push_back(rank.rank);
    std::sort(culprit.accusers.begin(), culprit.accusers.end());
    culprit.accusers.erase(std::unique(culprit.accusers.begin(), culprit.accusers.end()), culprit.accusers.end());
    return culprit;
  }
  // The rank most of the errors name (the lowest on a tie); when it failed first itself, the ordinary
  // report already names it.
  for (const auto& [accused, accusers] : accusers_of)
    if (culprit.rank < 0 || accusers.size() > culprit.accusers.size()) {
      culprit.rank = accused;
      culprit.accusers = accusers;
      culprit.reason = reasons[accused];
    }
  if (culprit.rank < 0 || culprit.rank == first.rank) return std::nullopt;
  std::sort(culprit.accusers.begin(), culprit.accusers.end());
  return culprit;
}

std::string waiting_for_it(const std::vector<int>& accusers, size_t culprits) {
  if (accusers.empty()) return "";
  return ": " + ranks_text(accusers) + " failed waiting for " + (culprits > 1 ? "them" : "it");
}

std::string headline(const Culprit& culprit, const std::vector<SupervisedRank>& ranks, const SupervisedRank& first,
                     const FailureReportContext& context) {
  const std::string start = context.tool_name + ": failed: ";
  if (!culprit.stopped.empty()) {
    std::string who;
    for (const SupervisedRank* rank : culprit.stopped) {
      who += (who.empty() ? "" : ", ") + identity(*rank);
      if (rank->stopped->pid != rank->pid) who += " whose process " + std::to_string(rank->stopped->pid);
    }
    const bool several = culprit.stopped.size() > 1;
    return start + (several ? "ranks " : "rank ") + who + (several ? " were " : " was ") +
           describe_stop(*culprit.stopped.front()->stopped) + " when rank " + std::to_string(first.rank) + " failed" +
           waiting_for_it(culprit.accusers, culprit.stopped.size()) +
           ". A stopped rank holds up every collective of the job: find what stopped it (kill -STOP, a shell's "
           "Ctrl-Z, a debugger) and let it run\n";
  }
  std::string who, state;
  const auto local =
      std::find_if(ranks.begin(), ranks.end(), [&](const SupervisedRank& r) { return r.rank == culprit.rank; });
  if (local != ranks.end()) {
    who = identity(*local);
    if (ended_successfully_before(*local, first))
      state = " had already ended (exit code 0)";
    else if (failed_on_its_own(*local))
      state = " " + common::describe_wait_status(local->wait_status);
    else
      state = " was still running, outside their collective, when rank " + std::to_string(first.rank) + " failed";
  } else {
    const int machine = context.local_world_size > 0 ? culprit.rank / context.local_world_size : -1;
    who = std::to_string(culprit.rank) + " (on machine " + std::to_string(machine) +
          "; its acc-launch reports how it ended)";
  }
  return start + "rank " + who + state + waiting_for_it(culprit.accusers, 1) + "; their errors say it " +
         culprit.reason + "\n";
}

// How one failed rank ended, the acc error it raised and, with `last_lines`, what it printed last.
std::string rank_block(const SupervisedRank& rank, const FailureReportContext& context, bool headline,
                       bool last_lines) {
  const std::string& tool = context.tool_name;
  std::string text = tool + ": " + (headline ? "failed: " : "") + "rank " + identity(rank) + " " +
                     common::describe_wait_status(rank.wait_status) + " after about " +
                     seconds_text(rank.ended - rank.started) + " s\n";
  // An acc program ends on an uncaught acc error with one line of its own (libacc's terminate
  // handler): that error is the failure, whatever else the rank printed after it.
  static constexpr std::string_view kUncaught = "acc: uncaught ";
  for (auto line = rank.history.lines().rbegin(); line != rank.history.lines().rend(); ++line) {
    if (line->rfind(kUncaught, 0) != 0) continue;
    text += tool + ": rank " + std::to_string(rank.rank) + " raised " + line->substr(kUncaught.size()) + "\n";
    break;
  }
  if (!last_lines) return text;
  if (!context.piped) {
    text += tool + ": its output is above\n";
  } else if (rank.history.lines().empty()) {
    text += tool + ": it printed nothing\n";
  } else {
    text += tool + ": its last lines:\n";
    for (const auto& line : rank.history.lines()) text += "  | " + line + "\n";
  }
  return text;
}

// Ranks that ended successfully before `reporter` failed. A rank that leaves while its peers still run
// collectives makes them fail (a timeout, a closed connection): the rank to blame is the one that left,
// not the one that reported it.
std::string early_leavers(const std::vector<SupervisedRank>& ranks, const SupervisedRank& reporter,
                          const FailureReportContext& context) {
  std::string text;
  for (const SupervisedRank& rank : ranks) {
    if (&rank == &reporter || !ended_successfully_before(rank, reporter)) continue;
    text += context.tool_name + ": rank " + std::to_string(rank.rank) + " had already ended (exit code 0) " +
            seconds_text(reporter.ended - rank.ended) +
            " s before; a rank that leaves while the others still run collectives makes them fail, so rank " +
            std::to_string(rank.rank) + " may have left the training loop early\n";
  }
  return text;
}

}  // namespace

bool failed_on_its_own(const SupervisedRank& rank) {
  if (rank.running || !common::wait_status_failed(rank.wait_status)) return false;
  return !(rank.signalled && WIFSIGNALED(rank.wait_status) &&
           (WTERMSIG(rank.wait_status) == SIGTERM || WTERMSIG(rank.wait_status) == SIGKILL));
}

std::string stopped_ranks_text(const std::vector<SupervisedRank>& ranks) {
  std::string text;
  const StoppedProcess* stop = nullptr;
  int count = 0;
  for (const SupervisedRank& rank : ranks)
    if (rank.stopped) {
      text += (text.empty() ? "" : ", ") + identity(rank);
      if (!stop) stop = &*rank.stopped;
      ++count;
    }
  if (count == 0) return "";
  return (count > 1 ? "ranks " : "rank ") + text + (count > 1 ? " are " : " is ") + describe_stop(*stop);
}

std::string failure_report(const std::vector<SupervisedRank>& ranks, const SupervisedRank& first,
                           const FailureReportContext& context) {
  const auto culprit = find_culprit(ranks, first);
  if (!culprit) return rank_block(first, context, true, true) + early_leavers(ranks, first, context);
  // The blamed rank first; then every rank that failed on its own, in the order they ended, the first
  // one with its last lines.
  std::string text = headline(*culprit, ranks, first, context);
  std::vector<const SupervisedRank*> failed;
  for (const SupervisedRank& rank : ranks)
    if (failed_on_its_own(rank)) failed.push_back(&rank);
  std::stable_sort(failed.begin(), failed.end(), [&](const SupervisedRank* a, const SupervisedRank* b) {
    if ((a == &first) != (b == &first)) return a == &first;
    return a->ended < b->ended;
  });
  for (const SupervisedRank* rank : failed) text += rank_block(*rank, context, false, rank == &first);
  return text + early_leavers(ranks, first, context);
}

}  // namespace acc::launcher
