#include <gtest/gtest.h>

#include <set>

#include <acc_common/slurm_step.h>

namespace {

using acc::common::slurm_step_job_id;
using acc::common::slurm_step_port;

TEST(SlurmStep, JobIdNamesTheStep) {
  EXPECT_EQ(slurm_step_job_id("4711", "0"), "4711.0");
  EXPECT_EQ(slurm_step_job_id("4711", "3"), "4711.3");
  EXPECT_EQ(slurm_step_job_id("4711", ""), "4711.batch");
  EXPECT_EQ(slurm_step_job_id("", "0"), "");
}

TEST(SlurmStep, PortFollowsTheDocumentedRule) {
  EXPECT_EQ(slurm_step_port("4711", "0"), 10000 + 20 * (4711 % 1000) + 0);
  EXPECT_EQ(slurm_step_port("4711", "13"), 10000 + 20 * (4711 % 1000) + 2 * 3);
  EXPECT_EQ(slurm_step_port("4711", ""), 10000 + 20 * (4711 % 1000));
  // Job ids beyond what a long holds keep their last digits.
  EXPECT_EQ(slurm_step_port("123456789012345678901", "1"), 10000 + 20 * (678901 % 1000) + 2 * 1);
  EXPECT_EQ(slurm_step_port("12a", "0"), 0);
  EXPECT_EQ(slurm_step_port("", "0"), 0);
}

TEST(SlurmStep, ConcurrentJobsAndStepsGetDifferentPortsBelowTheEphemeralRange) {
  std::set<int> ports;
  for (int job = 100000; job < 101000; ++job) {
    for (int step = 0; step < 10; ++step) {
      const int port = slurm_step_port(std::to_string(job), std::to_string(step));
      EXPECT_GE(port, 10000);
      EXPECT_LT(port, 32768);
      EXPECT_EQ(port % 2, 0);  // its heartbeat port (+1) is no other step's rendezvous port
      ports.insert(port);
    }
  }
  EXPECT_EQ(ports.size(), 10000u);
}

}  // namespace
