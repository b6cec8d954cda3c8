// Resolving settings into a launch plan and the environment each rank gets; precedence; SLURM; output
// lines; ports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "did_you_mean.h"
#include "errors.h"
#include "launch_plan.h"
#include "launch_refusals.h"
#include "ports.h"
#include "program_links_acc.h"
#include "rank_environment.h"
#include "rank_output.h"

namespace acc::launcher {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string error_of(const LaunchSettings& s, const MachineFacts& facts = {}, const EnvMap& env = {}) {
  try {
    resolve_plan(s, facts, env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Plan, DefaultsAreOneProcessPerGpuOrOneCpuProcessWithANote) {
  LaunchPlan cpu = resolve_plan({}, MachineFacts{0, 8}, {});
  EXPECT_EQ(cpu.world_size, 1);
  EXPECT_EQ(cpu.distributed_type, DistributedType::kNo);
  EXPECT_EQ(cpu.master_port, 29500);
  EXPECT_EQ(cpu.omp_num_threads, 8);
  ASSERT_EQ(cpu.notes.size(), 1u);
  EXPECT_THAT(cpu.notes[0], HasSubstr("ask for more with --num_processes N"));

  LaunchPlan gpus = resolve_plan({}, MachineFacts{4, 16}, {});
  EXPECT_EQ(gpus.world_size, 4);
  EXPECT_EQ(gpus.local_world_size, 4);
  EXPECT_EQ(gpus.distributed_type, DistributedType::kMultiGpu);
  EXPECT_EQ(gpus.omp_num_threads, 4);

  LaunchSettings forced_cpu;
  forced_cpu.use_cpu = true;
  EXPECT_EQ(resolve_plan(forced_cpu, MachineFacts{4, 16}, {}).world_size, 1);
}

TEST(Plan, CommandLineOverConfigOverDefaults) {
  LaunchSettings config;
  config.distributed_type = DistributedType::kMultiGpu;
  config.num_processes = 4;
  config.mixed_precision = "bf16";
  config.main_process_port = 29600;
  config.fsdp["fsdp_offload_params"] = "true";
  LaunchSettings flags;
  flags.num_processes = 2;
  flags.use_cpu = true;
  flags.fsdp["fsdp_offload_params"] = "false";
  const LaunchSettings merged = overlay(config, flags);
  EXPECT_EQ(merged.num_processes, 2);                   // flag wins
  EXPECT_EQ(merged.mixed_precision, "bf16");            // config fills in
  EXPECT_EQ(merged.main_process_port, 29600);
  EXPECT_EQ(merged.fsdp.at("fsdp_offload_params"), "false");
  const LaunchPlan plan = resolve_plan(merged, MachineFacts{8, 8}, {});
  EXPECT_EQ(plan.distributed_type, DistributedType::kMultiCpu);  // --cpu turns MULTI_GPU into MULTI_CPU
  EXPECT_EQ(plan.world_size, 2);
  EXPECT_TRUE(plan.port_given);
}

TEST(Plan, MultiMachineRanksAndErrors) {
  LaunchSettings s;
  s.num_processes = 4;
  s.num_machines = 2;
  s.machine_rank = 1;
  s.main_process_ip = "10.1.2.3";
  const LaunchPlan plan = resolve_plan(s, MachineFacts{0, 4}, {});
  EXPECT_EQ(plan.local_world_size, 2);
  EXPECT_EQ(plan.master_addr, "10.1.2.3");
  const EnvMap env = rank_environment(plan, 1, 0, 0, {});
  EXPECT_EQ(env.at("RANK"), "3");
  EXPECT_EQ(env.at("LOCAL_RANK"), "1");
  EXPECT_EQ(env.at("GROUP_RANK"), "1");
  EXPECT_EQ(env.at("WORLD_SIZE"), "4");
  EXPECT_EQ(env.at("LOCAL_WORLD_SIZE"), "2");

  LaunchSettings no_ip = s;
  no_ip.main_process_ip.reset();
  EXPECT_THAT(error_of(no_ip), HasSubstr("--main_process_ip is required with --num_machines 2"));
  LaunchSettings uneven = s;
  uneven.num_processes = 3;
  EXPECT_THAT(error_of(uneven), HasSubstr("--num_processes 3 (the total over all machines) is not divisible by --num_machines 2"));
  LaunchSettings bad_rank = s;
  bad_rank.machine_rank = 2;
  EXPECT_THAT(error_of(bad_rank), HasSubstr("--machine_rank 2 is out of range for --num_machines 2"));
  LaunchSettings port0 = s;
  port0.main_process_port = 0;
  EXPECT_THAT(error_of(port0), HasSubstr("--main_process_port 0 (a free port) works on one machine only"));
  LaunchSettings minus_one;
  minus_one.num_processes = -1;
  EXPECT_THAT(error_of(minus_one), HasSubstr("pass --num_processes N"));
}

TEST(Plan, EnvironmentMatchesAccelerateSpellings) {
  LaunchSettings s;
  s.num_processes = 2;
  s.mixed_precision = "fp16";
  s.gpu_ids = "1,3";
  s.gradient_accumulation_steps = 4;
  s.debug = true;
  const LaunchPlan plan = resolve_plan(s, MachineFacts{4, 8}, {{"OMP_NUM_THREADS", "3"}});
  const EnvMap env = rank_environment(plan, 0, 2, 5, {{"OMP_NUM_THREADS", "3"}, {"PATH", "/bin"}});
  EXPECT_EQ(env.at("ACCELERATE_MIXED_PRECISION"), "fp16");
  EXPECT_EQ(env.at("ACCELERATE_USE_CPU"), "False");
  EXPECT_EQ(env.at("ACCELERATE_DEBUG_MODE"), "true");
  EXPECT_EQ(env.at("ACCELERATE_GRADIENT_ACCUMULATION_STEPS"), "4");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "1,3");
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "3");  // the user's value is kept
  EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(env.at("MASTER_PORT"), "29500");
  EXPECT_EQ(env.at("TORCHELASTIC_RESTART_COUNT"), "2");
  EXPECT_EQ(env.at("PATH"), "/bin");
  EXPECT_EQ(env.count("ACCELERATE_USE_FSDP"), 0u);
}

TEST(Plan, SeveralMachinesWithoutAStoreSecretGetANote) {
  LaunchSettings s;
  s.num_processes = 4;
  s.num_machines = 2;
  s.main_process_ip = "10.0.0.1";
  s.machine_rank = 0;
  const LaunchPlan open = resolve_plan(s, {}, {});
  ASSERT_FALSE(open.notes.empty());
  EXPECT_THAT(open.notes.back(), HasSubstr("admits any client that reaches it; export the same ACC_STORE_SECRET"));
  const LaunchPlan gated = resolve_plan(s, {}, {{"ACC_STORE_SECRET", "0123456789abcdef"}});
  for (const auto& note : gated.notes) EXPECT_THAT(note, Not(HasSubstr("ACC_STORE_SECRET")));
}

TEST(Plan, StoreSocketGoesToRankZeroOnlyAndTheUsersJobIdWins) {
  LaunchSettings s;
  s.num_processes = 2;
  LaunchPlan plan = resolve_plan(s, {}, {});
  plan.store_listen_fd = 9;
  plan.job_id = "fresh";
  const EnvMap rank0 = rank_environment(plan, 0, 0, 0, {{"ACC_STORE_LISTEN_FD", "4"}});
  const EnvMap rank1 = rank_environment(plan, 1, 0, 0, {{"ACC_STORE_LISTEN_FD", "4"}});
  EXPECT_EQ(rank0.at("ACC_STORE_LISTEN_FD"), "9");
  EXPECT_EQ(rank1.count("ACC_STORE_LISTEN_FD"), 0u);  // an outer launch's number means nothing here
  EXPECT_EQ(rank1.at("ACC_JOB_ID"), "fresh");
  EXPECT_EQ(rank_environment(plan, 1, 0, 0, {{"ACC_JOB_ID", "mine"}}).at("ACC_JOB_ID"), "mine");
}

TEST(Plan, FsdpEnvironmentHasAccelerateDefaults) {
  LaunchSettings s;
  s.distributed_type = DistributedType::kFsdp;
  s.num_processes = 2;
  s.fsdp["fsdp_sharding_strategy"] = "SHARD_GRAD_OP";
  s.fsdp["fsdp_state_dict_type"] = "SHARDED_STATE_DICT";
  const EnvMap env = rank_environment(resolve_plan(s, {}, {}), 0, 0, 0, {});
  EXPECT_EQ(env.at("ACCELERATE_USE_FSDP"), "true");
  EXPECT_EQ(env.at("FSDP_SHARDING_STRATEGY"), "SHARD_GRAD_OP");
  EXPECT_EQ(env.at("FSDP_STATE_DICT_TYPE"), "SHARDED_STATE_DICT");
  EXPECT_EQ(env.at("FSDP_VERSION"), "1");
  EXPECT_EQ(env.at("FSDP_OFFLOAD_PARAMS"), "false");
  EXPECT_EQ(env.at("FSDP_MIN_NUM_PARAMS"), "100000000");
  EXPECT_EQ(env.at("FSDP_USE_ORIG_PARAMS"), "true");
  EXPECT_EQ(env.at("FSDP_SYNC_MODULE_STATES"), "true");
  EXPECT_EQ(env.at("FSDP_CPU_RAM_EFFICIENT_LOADING"), "true");
  EXPECT_EQ(env.at("FSDP_ACTIVATION_CHECKPOINTING"), "false");
  EXPECT_EQ(env.count("FSDP_AUTO_WRAP_POLICY"), 0u);  // unset and no default: not exported, as Accelerate
  EXPECT_EQ(env.count("FSDP_BACKWARD_PREFETCH"), 0u);

  LaunchSettings not_fsdp;
  not_fsdp.fsdp["fsdp_offload_params"] = "true";
  EXPECT_THAT(resolve_plan(not_fsdp, {}, {}).notes.back(), HasSubstr("fsdp_* settings are ignored"));
}

// The variables a launch gives the ranks are judged as the runtime judges them; each refusal names where
// the setting came from: the flag (which wins over the file), else the config file's line, else the key.
TEST(Refusals, NameTheFlagOrTheConfigLineOfTheSetting) {
  LaunchSettings s;
  s.distributed_type = DistributedType::kFsdp;
  s.num_processes = 2;
  s.fsdp["fsdp_cpu_ram_efficient_loading"] = "true";
  s.fsdp["fsdp_sync_module_states"] = "false";
  const EnvMap variables = rank_environment(resolve_plan(s, {}, {}), 0, 0, 0, {});  // no longer refused here

  SettingSources from_file;
  from_file.config_path = "cfg.yaml";
  from_file.config_lines = {{"fsdp_cpu_ram_efficient_loading", 7}};
  auto refusals = launch_refusals(variables, from_file);
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0].message, "cfg.yaml:7: fsdp_cpu_ram_efficient_loading: cpu_ram_efficient_loading needs "
                                 "sync_module_states (the processes that build the model empty get the main "
                                 "process's weights through it); set fsdp_sync_module_states true, or "
                                 "fsdp_cpu_ram_efficient_loading false");
  EXPECT_TRUE(refusals[0].every_program);

  SettingSources from_flags = from_file;
  from_flags.flags.fsdp["fsdp_cpu_ram_efficient_loading"] = "true";
  EXPECT_THAT(launch_refusals(variables, from_flags).at(0).message, HasSubstr("--fsdp_cpu_ram_efficient_loading: cpu_ram"));
  EXPECT_THAT(launch_refusals(variables, {}).at(0).message, HasSubstr("fsdp_cpu_ram_efficient_loading: cpu_ram"));

  // Only acc programs refuse fp8 and TRANSFORMER_BASED_WRAP without class names.
  LaunchSettings acc_only;
  acc_only.distributed_type = DistributedType::kFsdp;
  acc_only.mixed_precision = "fp8";
  acc_only.fsdp["fsdp_auto_wrap_policy"] = "TRANSFORMER_BASED_WRAP";
  refusals = launch_refusals(configured_variables(acc_only, {}), {});
  ASSERT_EQ(refusals.size(), 2u);
  EXPECT_THAT(refusals[0].message, HasSubstr("mixed_precision: fp8 training is not part of acc"));
  EXPECT_THAT(refusals[1].message, HasSubstr("fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP needs the module types"));
  EXPECT_FALSE(refusals[0].every_program || refusals[1].every_program);
  // configured_variables (acc-env's) and rank_environment (acc-launch's) give the ranks the same.
  acc_only.num_processes = 2;
  const EnvMap rank = rank_environment(resolve_plan(acc_only, {}, {}), 0, 0, 0, {});
  for (const auto& [name, value] : configured_variables(acc_only, {})) EXPECT_EQ(rank.at(name), value) << name;
  // Without FSDP, FSDP_* settings are not the ranks'.
  acc_only.distributed_type = DistributedType::kMultiCpu;
  EXPECT_EQ(launch_refusals(configured_variables(acc_only, {}), {}).size(), 1u);
}

TEST(Refusals, FsdpSettingsAccDoesNotActOnAreNotedWithWhatItDoesInstead) {
  LaunchSettings s;
  s.distributed_type = DistributedType::kFsdp;
  s.fsdp["fsdp_version"] = "1";
  s.fsdp["fsdp_sharding_strategy"] = "FULL_SHARD";
  EXPECT_TRUE(ignored_fsdp_notes(s, {}).empty());  // FSDP1 is what acc's FSDP is closest to
  s.fsdp["fsdp_version"] = "2";
  s.fsdp["fsdp_use_orig_params"] = "false";
  SettingSources sources;
  sources.config_path = "cfg.yaml";
  sources.config_lines = {{"fsdp_version", 4}};
  const auto notes = ignored_fsdp_notes(s, sources);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_THAT(notes[0], HasSubstr("cfg.yaml:4: fsdp_version: 2 is ignored: acc has one FSDP, not torch's FSDP2"));
  EXPECT_THAT(notes[1], HasSubstr("fsdp_use_orig_params: false is ignored: acc always keeps the model's own parameters"));
  s.distributed_type = DistributedType::kMultiGpu;
  EXPECT_TRUE(ignored_fsdp_notes(s, sources).empty());
}

TEST(Plan, SlurmStepGivesMachineRankAndMainHost) {
  const EnvMap slurm = {{"SLURM_STEP_ID", "0"},  {"SLURM_NNODES", "2"}, {"SLURM_NTASKS", "2"},
                        {"SLURM_NODEID", "1"},   {"SLURM_PROCID", "1"}, {"SLURM_JOB_NODELIST", "gpu[07-08]"}};
  LaunchSettings s;
  s.num_processes = 4;
  const LaunchPlan plan = resolve_plan(s, MachineFacts{0, 4}, slurm);
  EXPECT_EQ(plan.num_machines, 2);
  EXPECT_EQ(plan.machine_rank, 1);
  EXPECT_EQ(plan.master_addr, "gpu07");

  s.machine_rank = 0;  // flags still win
  EXPECT_EQ(resolve_plan(s, MachineFacts{0, 4}, slurm).machine_rank, 0);

  EnvMap per_rank = slurm;
  per_rank["SLURM_NTASKS"] = "8";
  EXPECT_THAT(error_of(s, {}, per_rank), HasSubstr("srun --ntasks-per-node=1 acc-launch"));

  EnvMap batch_script = slurm;  // no job step: SLURM is ignored
  batch_script.erase("SLURM_STEP_ID");
  EXPECT_EQ(resolve_plan(LaunchSettings{}, MachineFacts{0, 4}, batch_script).num_machines, 1);
}

TEST(Plan, SlurmStepGivesItsJobIdAndPortToEveryMachine) {
  const EnvMap slurm = {{"SLURM_STEP_ID", "1"}, {"SLURM_NNODES", "2"}, {"SLURM_NTASKS", "2"},
                        {"SLURM_NODEID", "0"},  {"SLURM_JOB_ID", "4711"}, {"SLURM_JOB_NODELIST", "n[1-2]"}};
  LaunchSettings s;
  s.num_processes = 4;
  const LaunchPlan plan = resolve_plan(s, MachineFacts{0, 4}, slurm);
  EXPECT_EQ(plan.job_id, "4711.1");
  EXPECT_EQ(plan.master_port, 10000 + 20 * (4711 % 1000) + 2 * 1);
  EXPECT_TRUE(plan.port_given);  // a busy port is an error: the other machines use the same one
  EXPECT_THAT(plan.notes.front(), HasSubstr("SLURM job step 4711.1"));
  s.main_process_port = 4000;  // a given port wins
  EXPECT_EQ(resolve_plan(s, MachineFacts{0, 4}, slurm).master_port, 4000);
}

// The variables the Kubeflow training operator gives a PyTorchJob's pods (PET_* are torchrun's flags).
TEST(Plan, PyTorchJobPodVariables) {
  const EnvMap pod = {{"PET_NNODES", "3"},        {"PET_NODE_RANK", "2"},      {"PET_NPROC_PER_NODE", "2"},
                      {"PET_MASTER_ADDR", "job-master-0"}, {"PET_MASTER_PORT", "23456"},
                      {"RANK", "2"},               {"WORLD_SIZE", "6"},          {"MASTER_ADDR", "job-master-0"}};
  const LaunchPlan plan = resolve_plan(LaunchSettings{}, MachineFacts{0, 4}, pod);
  EXPECT_EQ(plan.num_machines, 3);
  EXPECT_EQ(plan.machine_rank, 2);
  EXPECT_EQ(plan.world_size, 6);
  EXPECT_EQ(plan.local_world_size, 2);
  EXPECT_EQ(plan.master_addr, "job-master-0");
  EXPECT_EQ(plan.master_port, 23456);
  EnvMap automatic = pod;  // "auto": one process per GPU, as without the variable
  automatic["PET_NPROC_PER_NODE"] = "auto";
  EXPECT_EQ(resolve_plan(LaunchSettings{}, MachineFacts{2, 4}, automatic).world_size, 6);
  LaunchSettings flags;
  flags.num_processes = 3;
  flags.main_process_port = 4000;
  const LaunchPlan given = resolve_plan(flags, MachineFacts{0, 4}, pod);
  EXPECT_EQ(given.world_size, 3);
  EXPECT_EQ(given.master_port, 4000);
}

TEST(Plan, FirstSlurmHost) {
  EXPECT_EQ(first_slurm_host("node1"), "node1");
  EXPECT_EQ(first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(first_slurm_host("gpu[003-005,9],cpu1"), "gpu003");
  EXPECT_EQ(first_slurm_host("rack[2]-n[1-4]"), "rack2-n1");
}

// The address a reserved socket listens on, as "a.b.c.d:port".
std::string listening_address(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  char text[INET_ADDRSTRLEN] = "";
  inet_ntop(AF_INET, &address.sin_addr, text, sizeof(text));
  return std::string(text) + ":" + std::to_string(ntohs(address.sin_port));
}

TEST(Ports, ReservedSocketListensOnLoopbackOnlyAndKeepsThePort) {
  LaunchPlan plan;
  plan.world_size = 2;
  plan.master_port = 0;
  const StoreSocket socket = reserve_store_socket(plan);
  ASSERT_GE(socket.fd(), 0);
  EXPECT_GT(plan.master_port, 0);
  EXPECT_EQ(listening_address(socket.fd()), "127.0.0.1:" + std::to_string(plan.master_port));
  int listening = 0;
  socklen_t length = sizeof(listening);
  ASSERT_EQ(getsockopt(socket.fd(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &length), 0);
  EXPECT_TRUE(listening);

  // While it is held, nobody else gets the port: a second job that asks for it is told.
  LaunchPlan second;
  second.world_size = 2;
  second.master_port = plan.master_port;
  second.port_given = true;
  try {
    reserve_store_socket(second);
    ADD_FAILURE() << "a busy port chosen by the user must be an error";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("port " + std::to_string(plan.master_port) +
                                    " (--main_process_port) is already in use"));
    EXPECT_THAT(e.what(), HasSubstr("--main_process_port 0"));
  }
  second.port_given = false;  // the default port moves instead, with a note
  const StoreSocket moved = reserve_store_socket(second);
  EXPECT_NE(second.master_port, plan.master_port);
  EXPECT_GE(moved.fd(), 0);
  ASSERT_FALSE(second.notes.empty());
  EXPECT_THAT(second.notes.back(), HasSubstr("is in use; using free port " + std::to_string(second.master_port)));
}

TEST(Ports, ForAProgramThatBindsItselfThePortIsSettledButNothingListens) {
  LaunchPlan plan;
  plan.world_size = 2;
  plan.master_port = 0;
  const StoreSocket socket = reserve_store_socket(plan, /*listen=*/false);
  ASSERT_GE(socket.fd(), 0);
  EXPECT_GT(plan.master_port, 0);
  int listening = 1;
  socklen_t length = sizeof(listening);
  ASSERT_EQ(getsockopt(socket.fd(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &length), 0);
  EXPECT_FALSE(listening);
  // Another machine's rank that connects now is refused (and retries), not queued on a socket about to close.
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(plan.master_port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_NE(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(errno, ECONNREFUSED);
  ::close(client);
}

TEST(Ports, OnlyTheMainMachineOfADistributedJobReserves) {
  LaunchPlan other_machine;
  other_machine.world_size = 4;
  other_machine.num_machines = 2;
  other_machine.machine_rank = 1;
  other_machine.master_port = 29555;
  EXPECT_EQ(reserve_store_socket(other_machine).fd(), -1);
  EXPECT_EQ(other_machine.master_port, 29555);
  LaunchPlan single;
  EXPECT_EQ(reserve_store_socket(single).fd(), -1);  // one rank: nothing rendezvouses
}

TEST(Ports, UnresolvableAddressIsAUsageError) {
  LaunchPlan plan;
  plan.world_size = 2;
  plan.master_addr = "no-such-host.invalid";
  try {
    reserve_store_socket(plan);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'no-such-host.invalid' (--main_process_ip) does not resolve"));
  }
}

TEST(Ports, OnlyProgramsThatNeedLibaccGetTheReservedSocket) {
  EXPECT_TRUE(program_links_acc(FAKE_ACC_PROGRAM));
  EXPECT_FALSE(program_links_acc(FAKE_RANK));  // an ELF program without libacc
  EXPECT_FALSE(program_links_acc("sh"));  // found in PATH, not an acc program
  EXPECT_FALSE(program_links_acc(ACC_CONFIGS_DIR "/../README.md"));  // not ELF
  EXPECT_FALSE(program_links_acc("/no/such/program"));
}

TEST(Ports, JobIdsAreFreshHex) {
  const std::string a = new_job_id(), b = new_job_id();
  EXPECT_EQ(a.size(), 16u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

TEST(RankOutput, WholeLinesPrefixedAndHistoryKept) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  LineHistory history(2);
  RankStream stream("[rank1]: ", fds[1], -1, &history);
  stream.feed("par");
  stream.feed("tial\nsecond\nthi");
  stream.feed("rd");
  stream.finish();
  close(fds[1]);
  char buffer[256];
  const ssize_t got = read(fds[0], buffer, sizeof(buffer));
  close(fds[0]);
  EXPECT_EQ(std::string(buffer, static_cast<size_t>(got)), "[rank1]: partial\n[rank1]: second\n[rank1]: third\n");
  EXPECT_THAT(history.lines(), ::testing::ElementsAre("second", "third"));
}

TEST(Settings, MainProcessIpIsAnAddressOrAHostName) {
  const std::string label63(63, 'a');
  for (const std::string& good : std::vector<std::string>{
           "10.0.0.1", "127.0.0.1", "::1", "fd00::1", "2001:db8::8a2e:370:7334", "fe80::1%eth0", "localhost", "node-0",
           "node-0.example.com", "node-0.example.com.", "n01", "1a.example", label63 + ".example"})
    EXPECT_EQ(parse_host(good, "--main_process_ip"), good);
  const std::string allowed =
      "; expected an IPv4 address (10.0.0.1), an IPv6 address (fd00::1) or a host name (node-0.example.com)";
  for (const std::string& bad : std::vector<std::string>{"",
                                                         " ",
                                                         "a b",
                                                         "1.2.3.4.5",
                                                         "999.1.1.1",
                                                         "256.0.0.1",
                                                         "1.2.3",
                                                         "12345",
                                                         "-node",
                                                         "node-",
                                                         "a..b",
                                                         "a_b",
                                                         "[::1]",
                                                         "::1%",
                                                         "fe80::1%",
                                                         "http://node0",
                                                         "node0:29500",
                                                         "10.0.0.1\n",
                                                         label63 + "a.example",
                                                         std::string(250, 'a') + ".com"}) {
    try {
      parse_host(bad, "--main_process_ip");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_EQ(std::string(e.what()), "--main_process_ip: bad value " + quoted_value(bad) + allowed);
    }
  }
}

TEST(Settings, ValuesInMessagesStayOnOneLine) {
  EXPECT_EQ(quoted_value("a\nb\tc\x01"), "'a\\nb\\tc\\x01'");
  EXPECT_EQ(quoted_value(std::string(70, 'x')), "'" + std::string(60, 'x') + "...'");
}

TEST(DidYouMean, SuggestsOnlyPlausibleTypos) {
  EXPECT_EQ(closest_match("num_proceses", {"num_processes", "num_machines"}), "num_processes");
  EXPECT_EQ(closest_match("zzz", {"num_processes", "num_machines"}), std::nullopt);
}

}  // namespace
}  // namespace acc::launcher
