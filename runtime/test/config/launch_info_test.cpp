#include <gtest/gtest.h>

#include <acc/errors.h>
#include <acc/launch_info.h>

#include "env_fixture.h"

namespace {
using acc::detect_launch;
using acc::testing::fake_env;

TEST(Launch, NoVariablesMeansOneProcess) {
  auto info = detect_launch(fake_env({}));
  EXPECT_EQ(info.launcher, "none");
  EXPECT_EQ(info.world_size, 1);
  EXPECT_EQ(info.rank, 0);
  EXPECT_FALSE(info.is_distributed());
}

TEST(Launch, TorchrunVariables) {
  auto info = detect_launch(fake_env({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                      {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "10.1.2.3"},
                                      {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(info.launcher, "env");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 4);
  EXPECT_EQ(info.master_addr, "10.1.2.3");
  EXPECT_EQ(info.master_port, 1234);
  EXPECT_TRUE(info.is_distributed());
}

TEST(Launch, TorchrunDefaultsForOptionalVariables) {
  auto info = detect_launch(fake_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}}));
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
  EXPECT_EQ(info.master_port, 29500);
}

TEST(Launch, TorchrunWinsOverSlurm) {
  auto info = detect_launch(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "3"},
                                      {"SLURM_NTASKS", "4"}}));
  EXPECT_EQ(info.launcher, "env");
  EXPECT_EQ(info.world_size, 2);
}

TEST(Launch, Slurm) {
  auto info = detect_launch(fake_env({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"},
                                      {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "2"},
                                      {"SLURM_TASKS_PER_NODE", "2(x2),2"},
                                      {"SLURM_JOB_NODELIST", "gpu[07-09],cpu1"}}));
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.world_size, 6);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_world_size, 2);
  EXPECT_EQ(info.master_addr, "gpu07");
}

TEST(Launch, SlurmMasterAddrVariableWins) {
  auto info = detect_launch(fake_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
                                      {"SLURM_NODELIST", "a1"}, {"MASTER_ADDR", "head"},
                                      {"MASTER_PORT", "4000"}}));
  EXPECT_EQ(info.master_addr, "head");
  EXPECT_EQ(info.master_port, 4000);
}

TEST(Launch, SlurmStepIsTheJobIdAndGivesThePort) {
  auto info = detect_launch(fake_env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_NODEID", "0"},
                                      {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_STEP_NODELIST", "n[1-2]"},
                                      {"SLURM_JOB_ID", "4711"}, {"SLURM_STEP_ID", "2"}}));
  EXPECT_EQ(info.job_id, "4711.2");
  EXPECT_EQ(info.master_port, 10000 + 20 * (4711 % 1000) + 2 * 2);
  EXPECT_EQ(info.master_addr, "n1");
  // Two steps that run at once on the same nodes rendezvous apart.
  auto other = detect_launch(fake_env({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_NODEID", "0"},
                                       {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_STEP_NODELIST", "n[1-2]"},
                                       {"SLURM_JOB_ID", "4712"}, {"SLURM_STEP_ID", "0"}}));
  EXPECT_NE(other.master_port, info.master_port);
  EXPECT_NE(other.job_id, info.job_id);
}

TEST(Launch, SlurmStepKeepsGivenPortAndJobId) {
  auto info = detect_launch(fake_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NODELIST", "a1"},
                                      {"SLURM_JOB_ID", "4711"}, {"SLURM_STEP_ID", "0"},
                                      {"MASTER_PORT", "4000"}, {"ACC_JOB_ID", "mine"}}));
  EXPECT_EQ(info.master_port, 4000);
  EXPECT_EQ(info.job_id, "mine");
}

TEST(Launch, KubernetesPodWithOnlyPetVariables) {
  auto info = detect_launch(fake_env({{"PET_NNODES", "3"}, {"PET_NODE_RANK", "2"}, {"PET_NPROC_PER_NODE", "1"},
                                      {"PET_MASTER_ADDR", "job-master-0"}, {"PET_MASTER_PORT", "23456"}}));
  EXPECT_EQ(info.launcher, "kubernetes");
  EXPECT_EQ(info.world_size, 3);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.local_rank, 0);
  EXPECT_EQ(info.local_world_size, 1);
  EXPECT_EQ(info.master_addr, "job-master-0");
  EXPECT_EQ(info.master_port, 23456);
}

// What the training operator gives a worker pod of a PyTorchJob with a Master replica
// (pkg/controller.v1/pytorch/envvar.go): RANK is the pod's rank.
TEST(Launch, KubernetesPodOfAPyTorchJobStartedDirectly) {
  auto info = detect_launch(fake_env({{"MASTER_ADDR", "job-master-0"}, {"MASTER_PORT", "23456"},
                                      {"WORLD_SIZE", "2"}, {"RANK", "1"}, {"PET_MASTER_ADDR", "job-master-0"},
                                      {"PET_MASTER_PORT", "23456"}, {"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"}}));
  EXPECT_EQ(info.launcher, "env");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 2);
  EXPECT_EQ(info.master_addr, "job-master-0");
}

TEST(Launch, KubernetesPodWithSeveralProcessesNeedsALauncher) {
  for (const char* rank_variable : {"RANK", "PET_NODE_RANK"}) {
    try {
      detect_launch(fake_env({{rank_variable, "1"}, {"WORLD_SIZE", "4"}, {"PET_NNODES", "2"},
                              {"PET_NODE_RANK", "1"}, {"PET_NPROC_PER_NODE", "2"}, {"MASTER_ADDR", "m"}}));
      FAIL() << "expected ConfigError for " << rank_variable;
    } catch (const acc::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("PET_NPROC_PER_NODE"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("acc-launch"), std::string::npos) << e.what();
    }
  }
  // Under acc-launch or torchrun in the pod every process has its LOCAL_RANK: fine.
  auto info = detect_launch(fake_env({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                      {"PET_NPROC_PER_NODE", "2"}, {"MASTER_ADDR", "m"}}));
  EXPECT_EQ(info.rank, 3);
}

TEST(Launch, SlurmHostLists) {
  EXPECT_EQ(acc::first_slurm_host("node1"), "node1");
  EXPECT_EQ(acc::first_slurm_host("node[003-005,9]"), "node003");
  EXPECT_EQ(acc::first_slurm_host("a[1,2],b[3-4]"), "a1");
  EXPECT_EQ(acc::first_slurm_host("x,y[1-2]"), "x");
}

TEST(Launch, OpenMpi) {
  auto info = detect_launch(fake_env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  EXPECT_EQ(info.launcher, "openmpi");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.world_size, 4);
  EXPECT_EQ(info.local_rank, 2);
  EXPECT_EQ(info.master_addr, "127.0.0.1");
}

TEST(Launch, MultiNodeMpiWithoutMasterAddrIsAnError) {
  try {
    detect_launch(fake_env({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
    FAIL() << "expected ConfigError";
  } catch (const acc::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR"), std::string::npos) << e.what();
  }
}

TEST(Launch, MpichPmi) {
  auto info = detect_launch(fake_env({{"PMI_RANK", "1"}, {"PMI_SIZE", "3"},
                                      {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "3"}}));
  EXPECT_EQ(info.launcher, "pmi");
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world_size, 3);
  EXPECT_EQ(info.local_world_size, 3);
}

TEST(Launch, MalformedValuesNameTheVariable) {
  auto expect_error = [](std::map<std::string, std::string> vars, const std::string& needle) {
    try {
      detect_launch(fake_env(vars));
      FAIL() << "expected ConfigError mentioning " << needle;
    } catch (const acc::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK='x'");
  expect_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "is not below WORLD_SIZE");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"ACC_STORE_LISTEN_FD", "three"}},
               "ACC_STORE_LISTEN_FD='three'");
}

TEST(Launch, RendezvousVariables) {
  auto rank0 = detect_launch(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "2"},
                                       {"ACC_STORE_LISTEN_FD", "7"}, {"ACC_JOB_ID", "job-a"},
                                       {"TORCHELASTIC_RESTART_COUNT", "2"}}));
  EXPECT_EQ(rank0.store_listen_fd, 7);
  EXPECT_EQ(rank0.job_id, "job-a");
  EXPECT_EQ(rank0.restart_count, 2);
  EXPECT_FALSE(rank0.agent_store);
  // Only rank 0 serves: a descriptor number leaked into another rank's environment is not used.
  auto rank1 = detect_launch(fake_env({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"ACC_STORE_LISTEN_FD", "7"}}));
  EXPECT_FALSE(rank1.store_listen_fd.has_value());
}

TEST(Launch, TorchrunRunIdAndAgentStore) {
  auto info = detect_launch(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "2"},
                                      {"TORCHELASTIC_RUN_ID", "r-17"},
                                      {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  EXPECT_EQ(info.job_id, "r-17");
  EXPECT_TRUE(info.agent_store);
  // torchrun's placeholder when --rdzv-id is not given is no id; acc's own id wins over torchrun's.
  EXPECT_EQ(detect_launch(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "none"}}))
                .job_id, "");
  EXPECT_EQ(detect_launch(fake_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_RUN_ID", "r"},
                                    {"ACC_JOB_ID", "a"}}))
                .job_id, "a");
}
}  // namespace
