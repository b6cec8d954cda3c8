#include "launch_plan.h"

#include <algorithm>

#include <acc/environment.h>

#include <acc_common/slurm_step.h>

#include "errors.h"
#include "fsdp_options.h"

namespace acc::launcher {
namespace {

std::optional<std::string> lookup(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// `srun acc-launch ...` runs one launcher per node; SLURM then tells each launcher its machine rank, the
// machine count and the nodes. Flags and config still win. Outside a job step (e.g. in the batch script
// itself, where SLURM_STEP_ID is unset) nothing is taken from SLURM.
void apply_slurm(LaunchSettings& s, const EnvMap& env, std::vector<std::string>& notes, std::string& job_id) {
  const auto step = lookup(env, "SLURM_STEP_ID");
  const auto nodes = lookup(env, "SLURM_NNODES");
  const auto tasks = lookup(env, "SLURM_NTASKS");
  const auto node_id = lookup(env, "SLURM_NODEID");
  if (!step || !nodes || !tasks || !node_id) return;
  const int node_count = parse_int(*nodes, "SLURM_NNODES", 1);
  const int task_count = parse_int(*tasks, "SLURM_NTASKS", 1);
  if (task_count != node_count)
    throw UsageError("under srun, acc-launch must run once per node, but SLURM_NTASKS=" + *tasks + " for " +
                     *nodes + " node(s); use `srun --ntasks-per-node=1 acc-launch ...`, or start the ranks "
                     "directly with `srun ./program` (the runtime reads SLURM's variables)");
  if (!s.num_machines) s.num_machines = node_count;
  if (!s.machine_rank) s.machine_rank = parse_int(*node_id, "SLURM_NODEID", 0);
  if (!s.main_process_ip) {
    auto nodelist = lookup(env, "SLURM_STEP_NODELIST");
    if (!nodelist) nodelist = lookup(env, "SLURM_JOB_NODELIST");
    if (nodelist) s.main_process_ip = first_slurm_host(*nodelist);
  }
  // Steps of other jobs may share these nodes: the step's own port and id, as the runtime derives them
  // for ranks that srun starts directly (acc_common/slurm_step.h).
  const std::string job = lookup(env, "SLURM_JOB_ID").value_or(""), step_id = *step;
  if (!s.main_process_port) {
    if (const int port = common::slurm_step_port(job, step_id); port != 0) s.main_process_port = port;
  }
  job_id = common::slurm_step_job_id(job, step_id);
  notes.push_back("SLURM job step " + (job_id.empty() ? std::string("?") : job_id) + ": machine " +
                  std::to_string(*s.machine_rank) + " of " + std::to_string(*s.num_machines) +
                  ", main process on " + s.main_process_ip.value_or("?") + ":" +
                  (s.main_process_port ? std::to_string(*s.main_process_port) : std::string("?")));
}

// A Kubeflow PyTorchJob gives each pod torchrun's flags as PET_* variables: acc-launch in the container
// reads them as torchrun does. Flags and config still win.
void apply_pytorchjob(LaunchSettings& s, const EnvMap& env, std::vector<std::string>& notes) {
  const auto nodes = lookup(env, "PET_NNODES");
  if (!nodes) return;
  const int node_count = parse_int(*nodes, "PET_NNODES", 1);
  if (!s.num_machines) s.num_machines = node_count;
  if (const auto rank = lookup(env, "PET_NODE_RANK"); rank && !s.machine_rank)
    s.machine_rank = parse_int(*rank, "PET_NODE_RANK", 0);
  if (const auto addr = lookup(env, "PET_MASTER_ADDR"); addr && !s.main_process_ip) s.main_process_ip = *addr;
  if (const auto port = lookup(env, "PET_MASTER_PORT"); port && !s.main_process_port)
    s.main_process_port = parse_int(*port, "PET_MASTER_PORT", 1);
  // "auto", "gpu" and "cpu" leave the count to the machine, as an unset --num_processes does.
  if (const auto per_node = lookup(env, "PET_NPROC_PER_NODE");
      per_node && !s.num_processes && per_node->find_first_not_of("0123456789") == std::string::npos)
    s.num_processes = parse_int(*per_node, "PET_NPROC_PER_NODE", 1) * *s.num_machines;
  notes.push_back("Kubernetes PyTorchJob pod: machine " + std::to_string(s.machine_rank.value_or(0)) + " of " +
                  std::to_string(*s.num_machines) + ", main process on " + s.main_process_ip.value_or("?"));
}

}  // namespace

// Combinations the ranks refuse (fsdp_cpu_ram_efficient_loading without fsdp_sync_module_states, ...) are
// judged in launch_refusals.h, from these variables, where the config file's lines are known.
EnvMap fsdp_environment(const LaunchSettings& s) {
  EnvMap env{{env::kUseFsdp, "true"}};
  for (const auto& option : fsdp_options()) {
    auto chosen = s.fsdp.find(option.key);
    if (chosen != s.fsdp.end()) env[option.env] = chosen->second;
    else if (option.default_value) env[option.env] = *option.default_value;
  }
  return env;
}

LaunchPlan resolve_plan(const LaunchSettings& given, const MachineFacts& facts, const EnvMap& env) {
  LaunchPlan plan;
  LaunchSettings s = given;
  apply_slurm(s, env, plan.notes, plan.job_id);
  apply_pytorchjob(s, env, plan.notes);

  plan.num_machines = s.num_machines.value_or(1);
  plan.machine_rank = s.machine_rank.value_or(0);
  if (plan.machine_rank >= plan.num_machines)
    throw UsageError("--machine_rank " + std::to_string(plan.machine_rank) + " is out of range for --num_machines " +
                     std::to_string(plan.num_machines) + "; machine ranks go from 0 to " +
                     std::to_string(plan.num_machines - 1));

  plan.use_cpu = s.use_cpu.value_or(false) || s.distributed_type == DistributedType::kMultiCpu;
  if (s.num_processes && *s.num_processes == -1)
    throw UsageError("the config sets num_processes: -1, which means it must be given on the command line; "
                     "pass --num_processes N");
  if (s.num_processes) {
    if (*s.num_processes < 1) throw UsageError("--num_processes must be at least 1");
    plan.world_size = *s.num_processes;
  } else {
    // Accelerate's default: one process per GPU; without GPUs (or with --cpu) a single process.
    const int per_machine = (!plan.use_cpu && facts.gpu_count > 0) ? facts.gpu_count : 1;
    plan.world_size = per_machine * plan.num_machines;
    if (per_machine == 1 && plan.num_machines == 1)
      plan.notes.push_back(std::string(plan.use_cpu || facts.gpu_count == 0 ? "no GPU in use" : "one GPU") +
                           ": starting 1 process; ask for more with --num_processes N (or save a config with "
                           "`acc-config`)");
    else
      plan.notes.push_back("--num_processes not given: starting " + std::to_string(per_machine) +
                           " process(es) per machine, one per GPU");
  }
  if (plan.world_size % plan.num_machines != 0)
    throw UsageError("--num_processes " + std::to_string(plan.world_size) + " (the total over all machines) is not "
                     "divisible by --num_machines " + std::to_string(plan.num_machines) +
                     "; every machine runs the same number of processes");
  plan.local_world_size = plan.world_size / plan.num_machines;

  if (s.distributed_type) plan.distributed_type = *s.distributed_type;
  else if (plan.world_size > 1) plan.distributed_type = plan.use_cpu || facts.gpu_count == 0
                                                           ? DistributedType::kMultiCpu
                                                           : DistributedType::kMultiGpu;
  if (plan.use_cpu && plan.distributed_type == DistributedType::kMultiGpu)
    plan.distributed_type = DistributedType::kMultiCpu;

  plan.mixed_precision = s.mixed_precision.value_or("no");
  plan.debug = s.debug.value_or(false);
  plan.gradient_accumulation_steps = s.gradient_accumulation_steps;

  if (plan.num_machines > 1 && !s.main_process_ip)
    throw UsageError("--main_process_ip is required with --num_machines " + std::to_string(plan.num_machines) +
                     ": give the address of machine 0, which every machine can reach");
  plan.master_addr = s.main_process_ip.value_or("127.0.0.1");
  plan.port_given = s.main_process_port.has_value();
  plan.master_port = s.main_process_port.value_or(env::kDefaultMainProcessPort);
  if (plan.master_port > 65535)
    throw UsageError("--main_process_port " + std::to_string(plan.master_port) + " is not a port; use 1-65535, or 0 for a free one");
  if (plan.master_port == 0 && plan.num_machines > 1)
    throw UsageError("--main_process_port 0 (a free port) works on one machine only: the other machines could not "
                     "know which port was picked; choose a fixed port such as " +
                     std::to_string(env::kDefaultMainProcessPort));
  if (plan.num_machines > 1 && plan.machine_rank == 0 && !lookup(env, env::kStoreSecret))
    plan.notes.push_back("the rendezvous store at " + plan.master_addr + ":" + std::to_string(plan.master_port) +
                         " admits any client that reaches it; export the same " + env::kStoreSecret +
                         " (16 characters or more) on every machine to require it of every rank");

  if (!plan.use_cpu && s.gpu_ids && *s.gpu_ids != "all") plan.cuda_visible_devices = *s.gpu_ids;

  if (!lookup(env, "OMP_NUM_THREADS")) {
    // Without this every rank starts one thread per core and they fight over the same cores.
    plan.omp_num_threads = s.num_cpu_threads_per_process.value_or(std::max(1, facts.cpu_count / plan.local_world_size));
  }

  if (plan.distributed_type == DistributedType::kFsdp) plan.fsdp_env = fsdp_environment(s);
  else if (!s.fsdp.empty())
    plan.notes.push_back("fsdp_* settings are ignored because distributed_type is " + to_string(plan.distributed_type) +
                         "; add --use_fsdp (or distributed_type: FSDP) to use them");
  return plan;
}

}  // namespace acc::launcher
