// acc::launch: checks the call, reserves the rendezvous port, forks the ranks and supervises them
// (include/acc/function_launcher.h says what and why). Torch-free: the two torch calls a rank makes
// are in torch_in_rank.cpp.
#include <acc/function_launcher.h>
#include <acc/warnings.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>

#include "comm/state_slot.h"
#include "comm/gate/store_gate.h"
#include "function_launcher/fork_safety.h"
#include "function_launcher/listen_socket.h"
#include "function_launcher/rank_environment.h"
#include "function_launcher/rank_process.h"
#include "function_launcher/signals.h"
#include "function_launcher/supervision.h"

namespace acc {
namespace {

// One call at a time per process: SIGINT and SIGCHLD handling are process-wide.
std::mutex launch_mutex;

std::string seconds(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f s", static_cast<double>(ms) / 1000.0);
  return text;
}

// Everything that would make the call fail after the fork, refused before it.
void check_call(const std::function<void()>& fn, int num_processes, const LaunchOptions& options) {
  if (detail::is_launched_rank()) {
    throw ConfigError(
        "acc::launch: called from inside a rank of acc::launch; a rank cannot start ranks of its own. "
        "Call acc::launch once, from the program's own process, and work across the ranks inside the "
        "function with collectives");
  }
  if (!fn) throw ConfigError("acc::launch: the function to run is empty; pass a callable");
  if (num_processes < 1) {
    throw ConfigError("acc::launch: num_processes is " + std::to_string(num_processes) +
                      "; it must be at least 1 (the number of ranks to start on this machine)");
  }
  if (options.master_port() < 0 || options.master_port() > 65535) {
    throw ConfigError("acc::launch: master_port " + std::to_string(options.master_port()) +
                      " is not a TCP port; use 1-65535, or 0 (the default) for a free one");
  }
  if (options.grace_period().count() < 0) {
    throw ConfigError("acc::launch: grace_period is negative; use 0 or more (0: SIGKILL at once)");
  }
  if (options.timeout() && options.timeout()->count() <= 0) {
    throw ConfigError("acc::launch: timeout must be positive; leave it unset for no deadline");
  }
  if (options.num_cpu_threads_per_process() && *options.num_cpu_threads_per_process() < 1) {
    throw ConfigError("acc::launch: num_cpu_threads_per_process is " +
                      std::to_string(*options.num_cpu_threads_per_process()) +
                      "; use 1 or more, or leave it unset for the default");
  }
  detail::check_extra_environment(options.env());
  if (detail::partial_state_exists()) {
    throw ConfigError(
        "acc::launch: an acc::Accelerator or acc::PartialState was created in this process, and the "
        "ranks would inherit its one-process state instead of joining their job. Create them inside "
        "the launched function only (as with Accelerate's notebook_launcher), or call "
        "acc::PartialState::destroy() before acc::launch");
  }
  // Refused even with cpu(true), as Accelerate does: besides CUDA itself, torch's autograd threads
  // started for the GPUs do not survive fork either (a rank's backward would fail).
  if (detail::cuda_initialized()) {
    throw ConfigError(
        "acc::launch: CUDA is already initialized in this process, and the forked ranks could not use "
        "it (CUDA does not survive fork). Call acc::launch before anything touches CUDA: a CUDA "
        "tensor, torch::cuda::is_available() and torch::cuda::device_count() all initialize it. In a "
        "notebook, restart the kernel and launch first");
  }
}

std::optional<int> positive_int(const char* text) {
  if (text == nullptr) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < 1 || value > 1 << 20) return std::nullopt;
  return static_cast<int>(value);
}

// Intra-op threads of each rank. GNU OpenMP's pool does not survive fork: a child that opens a
// parallel region after the caller did hangs for ever (function_launcher.h has the experiment).
// The pool's threads are the caller's threads, and a process that runs only one thread has none.
int threads_per_rank(const LaunchOptions& options, int num_processes) {
  const int threads_now = detail::thread_count();  // 0: unknown
  const bool may_have_pool = threads_now != 1;
  const std::string why = "this process already runs " +
                          (threads_now > 0 ? std::to_string(threads_now) : std::string("several")) +
                          " threads, and a forked rank that starts OpenMP threads hangs when torch's "
                          "intra-op pool (GNU OpenMP) was among them";
  if (const auto& asked = options.num_cpu_threads_per_process()) {
    if (*asked > 1 && may_have_pool) {
      throw ConfigError("acc::launch: num_cpu_threads_per_process(" + std::to_string(*asked) +
                        ") cannot be honoured: " + why +
                        ". Leave it unset (each rank then runs 1 thread), or call acc::launch before "
                        "this process runs torch operations (in a notebook: restart the kernel and "
                        "launch first)");
    }
    return *asked;
  }
  const int wanted =
      positive_int(std::getenv("OMP_NUM_THREADS")).value_or(std::max(1, detail::usable_cpus() / num_processes));
  if (wanted > 1 && may_have_pool) {
    detail::warn("acc: note: acc::launch runs each rank with 1 intra-op thread instead of " + std::to_string(wanted) +
                 ": " + why + ". Call acc::launch before this process runs torch operations for more");
    return 1;
  }
  return wanted;
}

// Closes the caller's copy of a descriptor when the call ends, however it ends.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() { close(); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// "; rank 0 had already returned, 1.2 s before (...)": who may have left the job early.
std::string early_leavers_text(const std::vector<detail::RankProcess>& ranks, const detail::RankProcess& failed) {
  std::string text;
  for (const detail::RankProcess* rank : detail::early_leavers(ranks, failed)) {
    char before[32];
    std::snprintf(before, sizeof(before), "%.1f",
                  std::chrono::duration<double>(failed.failed_at() - rank->report->ended).count());
    text += "; rank " + std::to_string(rank->rank) + " had already returned, " + before + " s before";
  }
  if (!text.empty()) {
    text +=
        " (a rank that returns while the others still run collectives makes them fail: it may have left "
        "early)";
  }
  return text;
}

[[noreturn]] void throw_outcome(const detail::Outcome& outcome, const std::vector<detail::RankProcess>& ranks,
                                int num_processes, const LaunchOptions& options) {
  std::string what;  // what stopped the job, without the "acc::launch: " in front
  int rank = -1, exit_code = -1, signal = 0;
  std::string rank_error;
  if (const detail::RankProcess* failed = outcome.failed) {
    rank = failed->rank;
    what = "rank " + std::to_string(rank) + " of " + std::to_string(num_processes) + " failed: " + failed->describe();
    if (outcome.failed_after > 0) {
      what += outcome.stopped > 0 ? "; the other ranks failed after it or were stopped"
                                  : "; the other ranks failed after it";
    } else if (outcome.stopped > 0) {
      what += "; the other ranks were stopped";
    }
    what += early_leavers_text(ranks, *failed);
    if (failed->status_known) {
      if (WIFEXITED(failed->wait_status))
        exit_code = WEXITSTATUS(failed->wait_status);
      else
        signal = WTERMSIG(failed->wait_status);
    }
    if (failed->report && failed->report->threw) rank_error = failed->report->error;
  } else if (outcome.timed_out) {
    what = "the ranks did not finish within " + seconds(*options.timeout()) + " (LaunchOptions::timeout); the " +
           std::to_string(outcome.stopped) + " still running were stopped";
  }
  if (outcome.interrupted) {
    what = "interrupted (SIGINT); the ranks were stopped" + (what.empty() ? std::string() : ". Before that, " + what);
  }
  throw LaunchError("acc::launch: " + what, rank, exit_code, signal, rank_error);
}

// What every rank of the job shares; the port is set once it is reserved.
detail::JobEnvironment job_environment(const LaunchOptions& options, int num_processes, int threads) {
  detail::JobEnvironment job;
  job.world_size = num_processes;
  job.master_addr = options.master_addr();
  job.mixed_precision = options.mixed_precision();
  job.cpu = options.cpu();
  job.threads_per_rank = threads;
  job.extra = options.env();
  job.job_id = detail::new_job_id();
  // A secret of the job's own, as acc-launch gives one-machine jobs: no other local user's process
  // reaches the store through MASTER_PORT.
  job.store_secret = detail::new_store_secret();
  return job;
}

// Prepared before forking: a child should do as little as possible before `fn`.
std::vector<detail::RankEnvironment> rank_environments(const detail::JobEnvironment& job, int listen_fd) {
  std::vector<detail::RankEnvironment> environments;
  for (int rank = 0; rank < job.world_size; ++rank) {
    environments.push_back(detail::rank_environment(job, rank, listen_fd));
  }
  return environments;
}

// What the caller buffered would be written again by every rank when it flushes.
void flush_caller_output() {
  std::cout.flush();
  std::cerr.flush();
  std::clog.flush();
  std::fflush(nullptr);
}

std::optional<detail::SteadyClock::time_point> deadline_of(const LaunchOptions& options) {
  return options.timeout()
             ? std::optional<detail::SteadyClock::time_point>(detail::SteadyClock::now() + *options.timeout())
             : std::nullopt;
}

struct ReportPipe {
  int read_end = -1;   // the caller's
  int write_end = -1;  // the rank's
};

ReportPipe report_pipe(int rank) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw Error("acc::launch: cannot create a pipe for rank " + std::to_string(rank) + ": " + std::strerror(errno) +
                "; the ranks started so far were stopped (too many open files?)");
  }
  return {pipe_fds[0], pipe_fds[1]};
}

// Forks the rank that `start` describes; the caller keeps only `pipe`'s read end, to hear its report.
detail::RankProcess fork_rank(const detail::RankStart& start, const ReportPipe& pipe) {
  const pid_t pid = ::fork();
  if (pid == 0) detail::run_rank(start);  // never returns
  const int fork_error = errno;
  ::close(pipe.write_end);
  if (pid < 0) {
    ::close(pipe.read_end);
    throw Error("acc::launch: cannot start rank " + std::to_string(start.rank) + " (fork: " +
                std::strerror(fork_error) + "); the ranks started so far were stopped");
  }
  ::setpgid(pid, pid);  // also in the child: the group exists whichever runs first
  ::fcntl(pipe.read_end, F_SETFL, O_NONBLOCK);
  detail::RankProcess process;
  process.rank = start.rank;
  process.pid = pid;
  process.report_fd = pipe.read_end;
  return process;
}

// Forks the ranks one after the other into `ranks`. A rank closes the caller's ends of every pipe
// so far, and all but rank 0 close the listening socket.
void start_ranks(detail::RankSet& ranks, const std::function<void()>& fn,
                 const std::vector<detail::RankEnvironment>& environments, int threads, int listen_fd) {
  const pid_t caller = ::getpid();
  std::vector<int> read_ends;  // the caller's ends of the earlier ranks' pipes
  for (int rank = 0; rank < static_cast<int>(environments.size()); ++rank) {
    const ReportPipe pipe = report_pipe(rank);
    detail::RankStart start;
    start.rank = rank;
    start.caller = caller;
    start.report_fd = pipe.write_end;
    start.close_fds = read_ends;
    start.close_fds.push_back(pipe.read_end);
    if (rank != 0) start.close_fds.push_back(listen_fd);
    start.environment = &environments[rank];
    start.threads = threads;
    start.fn = &fn;
    ranks.add(fork_rank(start, pipe));
    read_ends.push_back(pipe.read_end);
  }
}

}  // namespace

void launch(const std::function<void()>& fn, int num_processes, const LaunchOptions& options) {
  check_call(fn, num_processes, options);
  std::lock_guard<std::mutex> one_at_a_time(launch_mutex);
  const int threads = threads_per_rank(options, num_processes);
  detail::JobEnvironment job = job_environment(options, num_processes, threads);
  // Reserved before any rank exists and handed to rank 0: no window in which another program can
  // take the port.
  const detail::ReservedPort reserved = detail::reserve_port(options.master_addr(), options.master_port());
  Descriptor listen_socket(reserved.fd);
  job.master_port = reserved.port;
  const auto environments = rank_environments(job, listen_socket.get());
  flush_caller_output();

  detail::ChildStatusScope child_status;
  // Before the first fork, so that a Ctrl-C is never missed (ranks take SIGINT's default back).
  std::optional<detail::InterruptScope> interrupts(std::in_place);
  detail::RankSet ranks;  // from here on, whatever happens, every child is stopped and reaped
  const auto deadline = deadline_of(options);
  start_ranks(ranks, fn, environments, threads, listen_socket.get());
  listen_socket.close();  // rank 0 holds it now; the port stays reserved until the job ends

  const detail::Outcome outcome = ranks.supervise(options.grace_period(), deadline, *interrupts);
  interrupts.reset();  // the program's own SIGINT handling is back
  if (outcome.success()) return;
  // The program handles Ctrl-C as it would have without acc::launch (by default, it ends); a
  // program that survives it learns that the job did not finish.
  if (outcome.interrupted) detail::redeliver_interrupt();
  throw_outcome(outcome, ranks.ranks(), num_processes, options);
}

}  // namespace acc
