#pragma once
// Turns layered settings into the concrete launch of this machine: how many ranks, which global ranks
// run here, the rendezvous address, and the values exported to every rank. Pure: the machine's facts and
// environment are inputs, so every rule here is unit-tested.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <acc/environment.h>
#include <acc_common/slurm_nodelist.h>

#include "launch_settings.h"

namespace acc::launcher {

using EnvMap = std::map<std::string, std::string>;

struct MachineFacts {
  int gpu_count = 0;  // GPUs visible to this process (CUDA_VISIBLE_DEVICES respected)
  int cpu_count = 1;  // cores this process may run on
};

struct LaunchPlan {
  DistributedType distributed_type = DistributedType::kNo;
  bool use_cpu = false;
  std::string mixed_precision = "no";
  bool debug = false;
  int world_size = 1;  // ranks over all machines
  int num_machines = 1;
  int machine_rank = 0;
  int local_world_size = 1;  // ranks on this machine; global rank = machine_rank * local_world_size + local_rank
  std::string master_addr = "127.0.0.1";
  int master_port = env::kDefaultMainProcessPort;  // 0 until reserve_store_socket() picks one
  bool port_given = false;  // set by flag or config: a busy port is then an error, not a reason to move
  std::optional<int> store_listen_fd;  // the reserved rendezvous socket, handed to rank 0 (ports.h)
  std::string job_id;  // exported as ACC_JOB_ID unless the environment already has one; empty: none
                       // (a SLURM step's id under srun: the same on every machine)
  std::optional<std::string> cuda_visible_devices;
  std::optional<int> gradient_accumulation_steps;
  std::optional<int> omp_num_threads;  // nullopt: the launcher's own OMP_NUM_THREADS is kept
  EnvMap fsdp_env;  // ACCELERATE_USE_FSDP and FSDP_*, empty unless FSDP
  std::vector<std::string> notes;  // said on stderr unless --quiet
};

// ACCELERATE_USE_FSDP and the FSDP_* variables of these settings: the chosen values, else Accelerate's
// launcher defaults (acc_common/fsdp_vocabulary.h).
EnvMap fsdp_environment(const LaunchSettings& settings);

// `env` is the launcher's environment (for OMP_NUM_THREADS and SLURM_*). Throws UsageError for settings
// that contradict each other, naming the flags involved.
LaunchPlan resolve_plan(const LaunchSettings& settings, const MachineFacts& facts, const EnvMap& env);

// The first host of a SLURM node list: "gpu[03-05,9],cpu1" -> "gpu03" (the runtime reads SLURM's lists
// with the same function).
using common::first_slurm_host;

}  // namespace acc::launcher
