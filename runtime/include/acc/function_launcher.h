#pragma once
// acc::launch: Accelerate's notebook_launcher for C++. Runs a function as the ranks of a job on this
// machine, from inside the current program: a REPL (cling, xeus-cling), a test, or a program that
// wants to parallelise one function without acc-launch.
//
//   acc::launch([] {
//     acc::Accelerator accelerator(acc::AcceleratorOptions().cpu(true));
//     ...  // the training loop, exactly as under acc-launch
//   }, 4, acc::LaunchOptions().cpu(true));
//
// How it works. The calling process forks `num_processes` children, like notebook_launcher (whose
// processes are forked too: a REPL cannot be re-executed). Each child gets acc-launch's environment
// (RANK, WORLD_SIZE, MASTER_ADDR/PORT, ACCELERATE_*, a job id; set in the child, never in the
// caller), runs `fn`, and ends with _exit: 0 when `fn` returns, 1 when it throws, after sending the
// exception's text to the caller. The caller's static destructors and atexit handlers never run in
// a child. The rendezvous port is bound and listening in the caller before the fork and handed to
// rank 0 (ACC_STORE_LISTEN_FD), so no other program can take it in between.
//
// Supervision is acc-launch's: a rank that fails makes the others get SIGTERM, then SIGKILL after
// the grace period; every child is reaped, its process group killed, and acc::launch throws
// LaunchError naming the first rank that failed (and ranks that had returned before it: a rank that
// leaves while the others still run collectives makes them fail). Ctrl-C (SIGINT) while it waits stops the ranks the
// same way, then is handled as the program would have handled it (by default: the program ends).
// If the caller dies, its ranks get SIGKILL (PR_SET_PDEATHSIG). Ranks share the caller's stdout and
// stderr; their stdin is /dev/null.
//
// What a forked child cannot do, and what acc::launch therefore refuses before forking (ConfigError):
// - CUDA initialized in the caller (any CUDA call, torch::cuda::is_available() and device_count()
//   included): CUDA does not survive fork. Accelerate refuses too, and so does this with cpu(true):
//   torch's autograd threads for the GPUs do not survive fork either. Call acc::launch before
//   anything touches CUDA (in a notebook: restart the kernel). The check asks the CUDA driver only
//   if it is already loaded, so it initializes nothing itself.
// - An Accelerator or PartialState created in the caller (and not ended by PartialState::destroy()):
//   the ranks would inherit its single-process state instead of joining the job. Create them inside
//   `fn` only, as with notebook_launcher.
// - A call from inside a rank (nested).
// - torch's intra-op threads (GNU OpenMP, libgomp) after the caller ran a parallel CPU op: a forked
//   child that starts a parallel region then hangs for ever (found by experiment on torch 2.11:
//   a matmul or an element-wise op on a 1024x1024 tensor in the caller, then the same in the child,
//   hangs with 2 threads and works with 1; with no parallel op in the caller, 2 threads work).
//   libgomp cannot be told, so acc::launch runs each rank with 1 intra-op thread whenever the
//   caller already runs more than one thread, and refuses num_cpu_threads_per_process > 1 then.
//   Calling at::set_num_threads(n > 1) inside `fn` would bring the hang back.
//
// Single machine only: every rank runs here (notebook_launcher's num_nodes is 1). For several
// machines use acc-launch.
#include <torch/arg.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <acc/errors.h>
#include <acc/options.h>

namespace acc {

/// Environment variables by name.
using EnvironmentVariables = std::map<std::string, std::string>;

/// acc::launch's options. Names follow notebook_launcher and acc-launch.
struct LaunchOptions {
  /// The address rank 0's rendezvous listens on and the other ranks connect to (MASTER_ADDR).
  TORCH_ARG(std::string, master_addr) = "127.0.0.1";
  /// The rendezvous port (MASTER_PORT; notebook_launcher's use_port). 0, the default, picks a free
  /// one, so that calls and programs never collide.
  TORCH_ARG(int, master_port) = 0;
  /// ACCELERATE_MIXED_PRECISION of every rank.
  TORCH_ARG(MixedPrecision, mixed_precision) = MixedPrecision::NO;
  /// ACCELERATE_USE_CPU of every rank: train on CPU even where CUDA is available.
  TORCH_ARG(bool, cpu) = false;
  /// Intra-op threads of each rank (OMP_NUM_THREADS; acc-launch's --num_cpu_threads_per_process).
  /// Default: OMP_NUM_THREADS if set, else the cores this process may use / num_processes; 1 when
  /// this process already runs other threads (see "torch's intra-op threads" above).
  TORCH_ARG(std::optional<int>, num_cpu_threads_per_process);
  /// From SIGTERM to SIGKILL when ranks are stopped (acc-launch's default).
  TORCH_ARG(std::chrono::milliseconds, grace_period) = std::chrono::seconds(5);
  /// A deadline for the whole job: ranks still running then are stopped and LaunchError is thrown.
  /// Unset: no deadline (collectives still have their own timeouts).
  TORCH_ARG(std::optional<std::chrono::milliseconds>, timeout);
  /// Extra environment variables of every rank (e.g. ACCELERATE_USE_FSDP, FSDP_*). The variables
  /// acc::launch sets itself (RANK, MASTER_PORT, ...) are refused here: use the options above.
  TORCH_ARG(EnvironmentVariables, env) = {};
};

/// Runs `fn` as ranks 0..num_processes-1 of one job on this machine, each in a forked child
/// process, and returns when all of them have returned. Throws LaunchError naming the first rank
/// that failed (threw, exited non-zero or was killed) after stopping the others, or when
/// `timeout` passes or SIGINT arrives; ConfigError, before starting anything, for a call that
/// cannot work (see the top of this header). Calls may follow one another; each is its own job.
void launch(const std::function<void()>& fn, int num_processes, const LaunchOptions& options = {});

}  // namespace acc
