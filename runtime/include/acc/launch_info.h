#pragma once
// How this process was started: which launcher, which rank, where the rendezvous is.
// Torch-free so that it can be unit-tested against fake environments.
#include <functional>
#include <optional>
#include <string>

#include <acc/environment.h>

namespace acc {

/// Reads one environment variable; returns nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

/// The process environment (std::getenv).
EnvLookup process_environment();

struct LaunchInfo {
  /// "env" (acc-launch, torchrun, accelerate launch, a PyTorchJob's pods), "slurm" (srun),
  /// "openmpi", "pmi" (MPICH, Intel MPI), "kubernetes" (a pod with only PET_* variables, one process
  /// per pod) or "none" (a plain single process).
  std::string launcher = "none";
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = env::kDefaultMainProcessPort;

  /// Rank 0's inherited, already listening store socket (ACC_STORE_LISTEN_FD): the port was
  /// reserved by the launcher. Without one, rank 0 binds MASTER_ADDR:MASTER_PORT itself.
  std::optional<int> store_listen_fd;
  /// The job's id (ACC_JOB_ID, else torchrun's TORCHELASTIC_RUN_ID unless "none"): every rank must
  /// find the same one in the store it joins.
  std::string job_id;
  /// torchrun's agent serves the store (TORCHELASTIC_USE_AGENT_STORE=True): rank 0 joins it too.
  bool agent_store = false;
  /// ACC_STORE_SECRET: when set, rank 0's store is reached only through a gate that requires it of
  /// every client (for jobs that span machines; see docs/runtime.md).
  std::string store_secret;
  /// Restarts of the job so far (TORCHELASTIC_RESTART_COUNT): each attempt rendezvouses afresh.
  int restart_count = 0;

  bool is_distributed() const { return world_size > 1; }
};

/// Detects the launcher from the environment, in this order: RANK/WORLD_SIZE (torchrun-style),
/// SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_*, PET_NNODES/PET_NODE_RANK, PMI_RANK/PMI_SIZE.
/// Under srun without ACC_JOB_ID the job id is "SLURM_JOB_ID.SLURM_STEP_ID", and without
/// MASTER_PORT the port is derived from it (common::slurm_step_port). Throws ConfigError on
/// inconsistent or malformed values (the message names the variable).
LaunchInfo detect_launch(const EnvLookup& env = process_environment());

/// First host of a SLURM host list: "node[03-05,9],gpu1" -> "node03".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace acc
