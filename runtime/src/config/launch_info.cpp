#include <acc/environment.h>
#include <acc/errors.h>
#include <acc/launch_info.h>
#include <acc_common/slurm_nodelist.h>
#include <acc_common/slurm_step.h>

#include <cstdlib>
#include <sstream>
#include <vector>

namespace acc {

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

namespace {

int parse_int(const EnvLookup& env, const std::string& name, int min_value) {
  auto text = env(name);
  if (!text) throw ConfigError("acc: environment variable " + name + " is required but unset");
  try {
    size_t used = 0;
    int value = std::stoi(*text, &used);
    if (used != text->size() || value < min_value) throw std::invalid_argument(name);
    return value;
  } catch (const std::logic_error&) {
    throw ConfigError("acc: environment variable " + name + "='" + *text +
                      "' is not an integer >= " + std::to_string(min_value) +
                      "; fix or unset it (it is set by the launcher)");
  }
}

int parse_int_or(const EnvLookup& env, const std::string& name, int fallback, int min_value) {
  return env(name) ? parse_int(env, name, min_value) : fallback;
}

void check_ranks(const LaunchInfo& info, const std::string& rank_var, const std::string& size_var) {
  if (info.rank >= info.world_size) {
    throw ConfigError("acc: " + rank_var + "=" + std::to_string(info.rank) + " is not below " +
                      size_var + "=" + std::to_string(info.world_size) +
                      "; the launcher's variables are inconsistent");
  }
  if (info.local_rank >= info.local_world_size) {
    throw ConfigError("acc: local rank " + std::to_string(info.local_rank) +
                      " is not below the local world size " +
                      std::to_string(info.local_world_size) + " (" + info.launcher +
                      " launch variables)");
  }
}

// MASTER_ADDR/MASTER_PORT may accompany any launcher. A job that spans machines cannot guess the
// rendezvous host, so it must be given rather than defaulting to loopback and hanging.
void read_master(const EnvLookup& env, LaunchInfo& info, const std::string& fallback_host) {
  if (auto addr = env(env::kMasterAddr); addr && !addr->empty()) {
    info.master_addr = *addr;
  } else if (!fallback_host.empty()) {
    info.master_addr = fallback_host;
  } else if (info.local_world_size < info.world_size) {
    throw ConfigError("acc: the " + info.launcher + " job spans several machines but MASTER_ADDR is "
                      "unset; export MASTER_ADDR=<host of rank 0> (with mpirun: -x MASTER_ADDR)");
  }
  info.master_port = parse_int_or(env, env::kMasterPort, info.master_port, 1);
  if (info.master_port > 65535) {
    throw ConfigError("acc: MASTER_PORT=" + std::to_string(info.master_port) +
                      " is not a TCP port (1-65535)");
  }
}

// SLURM_TASKS_PER_NODE looks like "2(x3),1": 2 tasks on each of 3 nodes, then 1.
int slurm_tasks_on_node(const std::string& spec, int node_id) {
  std::stringstream in(spec);
  std::string item;
  int node = 0;
  while (std::getline(in, item, ',')) {
    int tasks = std::stoi(item);
    int repeat = 1;
    if (auto x = item.find("(x"); x != std::string::npos) repeat = std::stoi(item.substr(x + 2));
    if (node_id < node + repeat) return tasks;
    node += repeat;
  }
  throw ConfigError("acc: SLURM_NODEID=" + std::to_string(node_id) +
                    " is not covered by SLURM_TASKS_PER_NODE='" + spec + "'");
}

// A Kubeflow PyTorchJob gives every pod PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE and
// PET_MASTER_ADDR/PORT (torchrun's flags as variables), and with a Master replica also RANK (the pod's
// rank) and WORLD_SIZE (all processes). One process per pod can start directly; several need a launcher
// in the pod, which gives each its own rank.
void check_pod_processes(const EnvLookup& env) {
  const auto per_pod = env("PET_NPROC_PER_NODE");
  if (!per_pod || env(env::kLocalRank)) return;
  int count = 1;
  try {
    count = std::stoi(*per_pod);
  } catch (const std::logic_error&) {
    count = 2;  // "auto", "gpu": more than one, as torchrun reads them
  }
  if (count <= 1) return;
  throw ConfigError("acc: this pod's PyTorchJob runs " + *per_pod + " processes per pod (PET_NPROC_PER_NODE) "
                    "but started the program directly, so RANK is the pod's rank and every process would "
                    "take it; start the program with `acc-launch program` (or torchrun) in the container, "
                    "which reads PET_* and gives each process its rank");
}

// What any launcher may add: acc's rendezvous variables and torchrun's agent store.
void read_rendezvous(const EnvLookup& env, LaunchInfo& info) {
  if (auto fd = env(env::kStoreListenFd); fd && info.rank == 0) {
    info.store_listen_fd = parse_int(env, env::kStoreListenFd, 0);
  }
  if (auto id = env(env::kJobId); id && !id->empty()) {
    info.job_id = *id;
  } else if (auto run_id = env(env::kRunId); run_id && *run_id != "none") {
    info.job_id = *run_id;
  }
  info.agent_store = env(env::kUseAgentStore).value_or("") == "True";
  info.store_secret = env(env::kStoreSecret).value_or("");
  info.restart_count = parse_int_or(env, env::kRestartCount, 0, 0);
}

}  // namespace

// The public name of the node-list reader acc-launch uses too.
std::string first_slurm_host(const std::string& nodelist) { return common::first_slurm_host(nodelist); }

LaunchInfo detect_launch(const EnvLookup& env) {
  LaunchInfo info;
  if (env(env::kRank) && env(env::kWorldSize)) {
    check_pod_processes(env);
    info.launcher = "env";
    info.world_size = parse_int(env, env::kWorldSize, 1);
    info.rank = parse_int(env, env::kRank, 0);
    info.local_rank = parse_int_or(env, env::kLocalRank, info.rank, 0);
    info.local_world_size = parse_int_or(env, env::kLocalWorldSize, info.world_size, 1);
    check_ranks(info, env::kRank, env::kWorldSize);
    read_master(env, info, "127.0.0.1");
  } else if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    info.launcher = "slurm";
    info.world_size = parse_int(env, "SLURM_NTASKS", 1);
    info.rank = parse_int(env, "SLURM_PROCID", 0);
    info.local_rank = parse_int_or(env, "SLURM_LOCALID", 0, 0);
    if (auto spec = env("SLURM_STEP_TASKS_PER_NODE") ? env("SLURM_STEP_TASKS_PER_NODE")
                                                       : env("SLURM_TASKS_PER_NODE")) {
      info.local_world_size = slurm_tasks_on_node(*spec, parse_int_or(env, "SLURM_NODEID", 0, 0));
    } else {
      info.local_world_size = info.world_size;
    }
    check_ranks(info, "SLURM_PROCID", "SLURM_NTASKS");
    auto nodes = env("SLURM_STEP_NODELIST") ? env("SLURM_STEP_NODELIST") : env("SLURM_JOB_NODELIST");
    if (!nodes) nodes = env("SLURM_NODELIST");
    // Steps of several jobs share nodes: without MASTER_PORT each step has a port of its own, derived
    // from its id, so that they neither collide on 29500 nor join each other's rank 0.
    const std::string job = env("SLURM_JOB_ID").value_or(""), step = env("SLURM_STEP_ID").value_or("");
    if (const int port = common::slurm_step_port(job, step); port != 0) info.master_port = port;
    read_master(env, info, nodes ? first_slurm_host(*nodes) : "127.0.0.1");
  } else if (env("OMPI_COMM_WORLD_RANK") && env("OMPI_COMM_WORLD_SIZE")) {
    info.launcher = "openmpi";
    info.world_size = parse_int(env, "OMPI_COMM_WORLD_SIZE", 1);
    info.rank = parse_int(env, "OMPI_COMM_WORLD_RANK", 0);
    info.local_rank = parse_int_or(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 0);
    info.local_world_size = parse_int_or(env, "OMPI_COMM_WORLD_LOCAL_SIZE", info.world_size, 1);
    check_ranks(info, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    read_master(env, info, "");
  } else if (env("PET_NNODES") && env("PET_NODE_RANK")) {
    check_pod_processes(env);
    info.launcher = "kubernetes";
    info.world_size = parse_int(env, "PET_NNODES", 1);
    info.rank = parse_int(env, "PET_NODE_RANK", 0);
    info.local_world_size = 1;
    check_ranks(info, "PET_NODE_RANK", "PET_NNODES");
    info.master_port = parse_int_or(env, "PET_MASTER_PORT", info.master_port, 1);
    read_master(env, info, env("PET_MASTER_ADDR").value_or(""));
  } else if (env("PMI_RANK") && env("PMI_SIZE")) {
    info.launcher = "pmi";
    info.world_size = parse_int(env, "PMI_SIZE", 1);
    info.rank = parse_int(env, "PMI_RANK", 0);
    info.local_rank = parse_int_or(env, "MPI_LOCALRANKID", 0, 0);
    info.local_world_size = parse_int_or(env, "MPI_LOCALNRANKS", info.world_size, 1);
    check_ranks(info, "PMI_RANK", "PMI_SIZE");
    read_master(env, info, "");
  }
  if (info.launcher != "none") read_rendezvous(env, info);
  if (info.launcher == "slurm" && info.job_id.empty()) {
    info.job_id = common::slurm_step_job_id(env("SLURM_JOB_ID").value_or(""), env("SLURM_STEP_ID").value_or(""));
  }
  return info;
}

}  // namespace acc
