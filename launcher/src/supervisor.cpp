#include "supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>

#include <acc_common/child_process.h>
#include <acc_common/process_status.h>

#include "errors.h"
#include "failure_report.h"
#include "machine_link.h"
#include "rank_environment.h"
#include "rank_logs.h"
#include "rank_output.h"
#include "spawn.h"
#include "stopped_process.h"
#include "supervised_rank.h"

namespace acc::launcher {
namespace {

constexpr auto kDrainTimeout = std::chrono::seconds(2);

// Why the program could not be executed, with the fix where one is clear. Only a name without '/' is looked
// up in PATH, so only there can ./NAME be the fix, and only when the current directory has such a file.
std::string exec_failure(const std::string& program, int error) {
  std::string message = "cannot execute '" + program + "': " + std::strerror(error);
  if (error != ENOENT) return message;
  struct stat info {};
  const bool exists = ::stat(program.c_str(), &info) == 0;
  if (program.find('/') != std::string::npos)
    return message + (exists ? " (the file exists: the interpreter on its #! line, or its dynamic loader, is missing)"
                             : " (check the path)");
  if (exists && S_ISREG(info.st_mode))
    return message +
           " (a name without '/' is looked up in PATH only; to run the one in the current directory, give ./" +
           program + ")";
  return message + " (not found in any directory of PATH; give its path, or add its directory to PATH)";
}

int exit_code_of(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : ExitCode::kSignalBase + WTERMSIG(wait_status);
}

using Rank = SupervisedRank;
using Stream = RankOutputStream;

enum class Outcome { kSuccess, kRankFailed, kMachineLost, kLeaderMovedOn, kInterrupted, kExecFailed };

class Supervisor {
 public:
  Supervisor(const LaunchPlan& plan, const SupervisorOptions& options, const EnvMap& env, int signal_fd,
             MachineLink* link)
      : plan_(plan), options_(options), env_(env), signal_fd_(signal_fd), link_(link) {}

  int run() {
    const int code = run_attempts();
    if (link_) link_->say_goodbye();
    return code;
  }

 private:
  int run_attempts() {
    int attempt = 0;
    for (int restarts = 0;; ++restarts) {
      Outcome outcome;
      do {
        if (!agree_on_attempt(attempt)) return interrupt_signal_ ? ExitCode::kSignalBase + interrupt_signal_ : 1;
        outcome = run_attempt(attempt);
      } while (outcome == Outcome::kLeaderMovedOn);  // not a restart of this machine: it joins machine 0's
      switch (outcome) {
        case Outcome::kSuccess:
          return ExitCode::kOk;
        case Outcome::kInterrupted:
          return ExitCode::kSignalBase + interrupt_signal_;
        case Outcome::kExecFailed:
          return exec_exit_code_;
        case Outcome::kRankFailed:
        case Outcome::kMachineLost:
        case Outcome::kLeaderMovedOn:
          break;
      }
      if (restarts >= options_.max_restarts) return failure_exit_code_;
      note("restarting all ranks (restart " + std::to_string(restarts + 1) + " of " +
           std::to_string(options_.max_restarts) + ")" +
           (link_ && plan_.machine_rank != 0 ? " when machine 0 restarts" : ""));
      ++attempt;
    }
  }

  // Machine 0 numbers the attempts; the others take its number, so that a machine restarted from outside
  // (a fresh acc-launch) rendezvouses in the attempt the others are in. Returns false when interrupted or
  // when machine 0's acc-launch did not answer within the join timeout.
  bool agree_on_attempt(int& attempt) {
    if (!link_) return true;
    link_->forget_losses();
    if (plan_.machine_rank == 0) {
      link_->set_attempt(attempt);
      return true;
    }
    const auto give_up = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(options_.join_timeout_s));
    for (;;) {
      const auto leader = link_->leader_attempt();
      const bool fresh = link_->connections() != connections_at_start_;
      if (leader && (last_attempt_ < 0 || fresh || *leader != last_attempt_)) {
        attempt = *leader;
        last_attempt_ = attempt;
        link_->set_attempt(attempt);
        connections_at_start_ = link_->connections();
        return true;
      }
      if (interrupt_signal_) return false;
      if (Clock::now() >= give_up) {
        say("machine 0's acc-launch at " + plan_.master_addr + ":" + std::to_string(MachineLink::agent_port(plan_)) +
            " did not answer within " + std::to_string(static_cast<long>(options_.join_timeout_s)) +
            " s; start it (the same command with --machine_rank 0), or check --main_process_ip and that port " +
            std::to_string(MachineLink::agent_port(plan_)) + " is reachable");
        return false;
      }
      poll_once(options_.monitor_interval_s * 5);
    }
  }

  // Pipes are needed to prefix lines, write log files and quote a failed rank's last lines. A single
  // process without log files inherits the console, so it behaves exactly as when run directly.
  bool piped() const { return plan_.world_size > 1 || !options_.log_dir.empty(); }

  void say(const std::string& message) const { write_all(STDERR_FILENO, options_.tool_name + ": " + message + "\n"); }
  void note(const std::string& message) const {
    if (!options_.quiet) say(message);
  }

  Outcome run_attempt(int attempt) {
    ranks_.clear();
    ranks_.resize(plan_.local_world_size);
    failed_rank_ = nullptr;
    machine_lost_ = false;
    leader_moved_on_ = false;
    attempt_ = attempt;
    kill_deadline_.reset();
    for (int local = 0; local < plan_.local_world_size; ++local) {
      ranks_[local].local_rank = local;
      ranks_[local].rank = plan_.machine_rank * plan_.local_world_size + local;
    }
    // Every log file of the attempt before any rank: a log that cannot be created stops the job with
    // no rank started, instead of leaving the ranks started before it running without supervision.
    if (!options_.log_dir.empty()) open_logs(attempt);
    for (Rank& rank : ranks_) {
      if (!start(rank, attempt)) {
        signal_all(SIGKILL);
        wait_for_ranks();
        finish_attempt();
        return Outcome::kExecFailed;
      }
    }
    wait_for_ranks();
    finish_attempt();
    if (interrupt_signal_) return Outcome::kInterrupted;
    if (leader_moved_on_ && !failed_rank_) return Outcome::kLeaderMovedOn;
    if (machine_lost_ && !failed_rank_) return Outcome::kMachineLost;
    if (failed_rank_) {
      report_failure(*failed_rank_);
      return Outcome::kRankFailed;
    }
    return Outcome::kSuccess;
  }

  void open_logs(int attempt) {
    try {
      for (Rank& rank : ranks_) {
        const RankLogFiles files = open_rank_logs(options_.log_dir, attempt, rank.rank);
        rank.streams[0].log_fd = files.stdout_fd;
        rank.streams[1].log_fd = files.stderr_fd;
      }
    } catch (const UsageError&) {
      for (Rank& rank : ranks_)
        for (Stream& stream : rank.streams)
          if (stream.log_fd >= 0) {
            ::close(stream.log_fd);
            stream.log_fd = -1;
          }
      throw;
    }
  }

  bool start(Rank& rank, int attempt) {
    SpawnRequest request;
    request.argv = options_.program;
    request.envp = to_envp(rank_environment(plan_, rank.local_rank, attempt, options_.max_restarts, env_));
    if (rank.rank == 0 && plan_.store_listen_fd) request.inherit_fd = *plan_.store_listen_fd;
    int write_ends[2] = {-1, -1};
    if (piped()) {
      const std::string prefix = plan_.world_size > 1 ? "[rank" + std::to_string(rank.rank) + "]: " : "";
      for (int i = 0; i < 2; ++i) {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) throw UsageError(std::string("cannot create a pipe: ") + std::strerror(errno));
        Stream& stream = rank.streams[i];
        stream.fd = fds[0];
        write_ends[i] = fds[1];
        const int console = i == 0 ? STDOUT_FILENO : STDERR_FILENO;
        const bool to_console = options_.log_dir.empty() || (options_.tee & (i + 1));
        stream.sink = std::make_unique<RankStream>(prefix, to_console ? console : -1, stream.log_fd, &rank.history);
      }
    }
    request.stdout_fd = write_ends[0];
    request.stderr_fd = write_ends[1];
    const SpawnResult result = spawn(request);
    for (int fd : write_ends)
      if (fd >= 0) ::close(fd);
    if (result.pid < 0) throw UsageError(std::string("cannot start a process: ") + std::strerror(result.exec_errno));
    rank.pid = result.pid;
    rank.running = true;
    rank.started = Clock::now();
    if (result.exec_errno != 0) {
      exec_failed_ = true;
      exec_exit_code_ = result.exec_errno == ENOENT ? ExitCode::kNotFound : ExitCode::kCannotExecute;
      say(exec_failure(options_.program[0], result.exec_errno));
      return false;
    }
    return true;
  }

  // Relays output and reacts to exits and signals until every rank has been reaped.
  void wait_for_ranks() {
    while (std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; })) {
      poll_once(options_.monitor_interval_s);
      if (link_ && link_->lost() && !machine_lost_ && !failed_rank_ && !interrupt_signal_) on_machine_lost();
      if (leader_ahead() && !machine_lost_ && !leader_moved_on_ && !failed_rank_ && !interrupt_signal_)
        on_leader_moved_on();
      if (kill_deadline_ && Clock::now() >= *kill_deadline_) {
        signal_all(SIGKILL);
        kill_deadline_.reset();
      }
    }
  }

  void poll_once(double max_wait_s) {
    std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
    std::vector<Stream*> streams{nullptr};
    for (Rank& rank : ranks_)
      for (Stream& stream : rank.streams)
        if (stream.fd >= 0) {
          fds.push_back({stream.fd, POLLIN, 0});
          streams.push_back(&stream);
        }
    auto wait = std::chrono::duration<double>(max_wait_s);
    if (kill_deadline_) wait = std::min<std::chrono::duration<double>>(wait, *kill_deadline_ - Clock::now());
    const size_t rank_fds = fds.size();
    if (link_) {
      link_->add_poll_fds(fds);
      wait = std::min<std::chrono::duration<double>>(wait, std::chrono::duration<double>(link_->seconds_to_next_duty(Clock::now())));
    }
    const int timeout_ms = std::max(0, static_cast<int>(wait.count() * 1000) + 1);
    const int ready = ::poll(fds.data(), fds.size(), timeout_ms);
    if (link_) link_->service(fds, Clock::now());
    if (ready <= 0) return;
    for (size_t i = 1; i < rank_fds; ++i)
      if (fds[i].revents) read_stream(*streams[i]);
    if (fds[0].revents & POLLIN) read_signals();
  }

  void read_stream(Stream& stream) {
    char buffer[65536];
    const ssize_t got = ::read(stream.fd, buffer, sizeof(buffer));
    if (got > 0) {
      stream.sink->feed(std::string_view(buffer, static_cast<size_t>(got)));
    } else if (got == 0 || errno != EINTR) {
      stream.sink->finish();
      ::close(stream.fd);
      stream.fd = -1;
    }
  }

  void read_signals() {
    signalfd_siginfo info;
    while (::read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
      if (info.ssi_signo == SIGCHLD) reap();
      else on_signal(static_cast<int>(info.ssi_signo));
    }
  }

  void on_signal(int sig) {
    if (interrupt_signal_) {
      say("got " + common::signal_name(sig) + " again: killing all ranks now");
      signal_all(SIGKILL);
      return;
    }
    interrupt_signal_ = sig;
    say("got " + common::signal_name(sig) + ": passing it to every rank (send it again to kill them at once)");
    signal_all(sig);
    kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.grace_period_s));
  }

  void reap() {
    int status = 0;
    pid_t pid;
    // As a child subreaper the launcher also inherits orphaned descendants of ranks; they are reaped here too.
    while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
      for (Rank& rank : ranks_) {
        if (rank.pid != pid || !rank.running) continue;
        rank.running = false;
        rank.wait_status = status;
        rank.ended = Clock::now();
        if (common::wait_status_failed(status) && !failed_rank_ && !interrupt_signal_ && !exec_failed_ &&
            !machine_lost_ && !leader_moved_on_)
          on_rank_failed(rank);
      }
    }
  }

  void on_rank_failed(Rank& rank) {
    failed_rank_ = &rank;
    failure_exit_code_ = exit_code_of(rank.wait_status);
    const bool others = std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
    // Before the other ranks are signalled: a rank found stopped now is most likely why this one failed
    // (its peers time out waiting for it), and the report leads with it.
    for (Rank& other : ranks_)
      if (other.running) other.stopped = find_stopped(other.pid);
    const std::string stopped = stopped_ranks_text(ranks_);
    say("rank " + std::to_string(rank.rank) + " " + common::describe_wait_status(rank.wait_status) +
        (stopped.empty() ? "" : "; " + stopped) +
        (others ? "; stopping the other ranks" : ""));
    if (link_) link_->announce_failure();
    signal_all(SIGTERM);
    kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.grace_period_s));
  }

  // Another machine is gone, or its ranks failed: this machine's ranks would wait in their next
  // collective for the collective timeout, so they are stopped now.
  void on_machine_lost() {
    machine_lost_ = true;
    failure_exit_code_ = 1;
    // The other machines' ranks failed, or theirs are gone: a rank of this machine found stopped is most
    // likely the one they waited for, and only this machine can tell.
    for (Rank& rank : ranks_)
      if (rank.running) rank.stopped = find_stopped(rank.pid);
    const std::string stopped = stopped_ranks_text(ranks_);
    say(*link_->lost() + "; stopping this machine's ranks" +
        (stopped.empty() ? ""
                         : ". On this machine " + stopped + ": the other machines' ranks most likely failed waiting for it"));
    signal_all(SIGTERM);
    kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.grace_period_s));
  }

  // A machine that joined while machine 0 was still stopping the ranks of an attempt took that attempt's
  // number; its ranks would wait, until the collective timeout, for peers that rendezvous in the next
  // attempt. When machine 0's heartbeat names a later attempt, this machine's ranks are stopped and
  // started again in it.
  bool leader_ahead() const {
    if (!link_ || plan_.machine_rank == 0) return false;
    const auto leader = link_->leader_attempt();
    return leader && *leader > attempt_;
  }

  void on_leader_moved_on() {
    leader_moved_on_ = true;
    note("machine 0 is in attempt " + std::to_string(*link_->leader_attempt()) + ", this machine's ranks in " +
         std::to_string(attempt_) + ": starting them again in machine 0's attempt");
    signal_all(SIGTERM);
    kill_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.grace_period_s));
  }

  // Signals each running rank's whole process group: the rank and whatever it started.
  void signal_all(int sig) {
    for (Rank& rank : ranks_)
      if (rank.running) {
        rank.signalled = true;
        common::signal_rank_group(rank.pid, sig);
      }
  }

  // After the ranks: descendants they left behind are killed (no orphans), and the pipes drained so
  // that the last lines are complete before the report.
  void finish_attempt() {
    // A group id can only be reused once the group is empty, and a leftover member keeps it alive;
    // an empty group makes kill() fail harmlessly with ESRCH.
    for (Rank& rank : ranks_)
      if (rank.pid > 0) ::kill(-rank.pid, SIGKILL);
    const auto give_up = Clock::now() + kDrainTimeout;
    auto open_streams = [this] {
      for (const Rank& rank : ranks_)
        for (const Stream& stream : rank.streams)
          if (stream.fd >= 0) return true;
      return false;
    };
    while (open_streams() && Clock::now() < give_up) poll_once(0.05);
    for (Rank& rank : ranks_)
      for (Stream& stream : rank.streams) {
        if (stream.fd >= 0) {
          stream.sink->finish();
          ::close(stream.fd);
          stream.fd = -1;
        }
        if (stream.log_fd >= 0) ::close(stream.log_fd);
        stream.log_fd = -1;
      }
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  void report_failure(const Rank& rank) const {
    FailureReportContext context;
    context.tool_name = options_.tool_name;
    context.piped = piped();
    context.local_world_size = plan_.local_world_size;
    write_all(STDERR_FILENO, failure_report(ranks_, rank, context));
  }

  const LaunchPlan& plan_;
  const SupervisorOptions& options_;
  const EnvMap& env_;
  int signal_fd_;
  std::vector<Rank> ranks_;
  const Rank* failed_rank_ = nullptr;
  int failure_exit_code_ = 1;
  int exec_exit_code_ = ExitCode::kNotFound;
  int interrupt_signal_ = 0;
  bool exec_failed_ = false;
  std::optional<Clock::time_point> kill_deadline_;
  MachineLink* link_;  // several machines only
  bool machine_lost_ = false;
  bool leader_moved_on_ = false;  // machine 0 runs a later attempt than this machine's ranks
  int attempt_ = 0;               // the attempt the ranks run
  int last_attempt_ = -1;  // machines other than 0: the attempt last run
  int connections_at_start_ = 0;
};

}  // namespace

int supervise(const LaunchPlan& plan, const SupervisorOptions& options, const EnvMap& base_env) {
  // Signals arrive through a descriptor polled with the ranks' output: no handlers, no races.
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&handled, sig);
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  const int signal_fd = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) throw UsageError(std::string("cannot create a signalfd: ") + std::strerror(errno));
  // A closed console must not kill the launcher while ranks still run.
  ::signal(SIGPIPE, SIG_IGN);
  // Descendants of a rank that outlive it are re-parented here instead of to init, so they are reaped.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  std::unique_ptr<MachineLink> link;
  if (plan.num_machines > 1 && options.heartbeat_timeout_s > 0)
    link = std::make_unique<MachineLink>(plan, options.heartbeat_timeout_s);
  Supervisor supervisor(plan, options, base_env, signal_fd, link.get());
  const int code = supervisor.run();
  ::close(signal_fd);
  return code;
}

}  // namespace acc::launcher
