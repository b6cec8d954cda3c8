// The store secret acc-launch gives every one-machine job (issue 35, item 3): without one, any local
// user could read and overwrite the job's rendezvous store through its port. The ranks inherit it
// through their environment only; a secret the user exported wins; a job on several machines gets
// none from the launcher (every machine needs the same one, which only the user can give).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "launch_plan.h"
#include "rank_environment.h"
#include "test_process.h"

namespace acc::launcher {
namespace {

using testing::Finished;
using testing::Options;
using testing::run;
using ::testing::HasSubstr;

constexpr const char* kSecretVariable = "ACC_STORE_SECRET";

LaunchPlan one_machine_plan(int ranks) {
  LaunchPlan plan;
  plan.distributed_type = DistributedType::kMultiCpu;
  plan.world_size = ranks;
  plan.local_world_size = ranks;
  return plan;
}

bool is_long_hex(const std::string& text) {
  return text.size() >= 32 && std::regex_match(text, std::regex("[0-9a-f]+"));
}

TEST(JobSecret, EveryRankOfAOneMachineJobGetsTheSameSecret) {
  const LaunchPlan plan = one_machine_plan(3);
  std::set<std::string> secrets;
  for (int local_rank = 0; local_rank < 3; ++local_rank) {
    for (int restart = 0; restart < 2; ++restart) {
      const EnvMap env = rank_environment(plan, local_rank, restart, 1, {});
      ASSERT_TRUE(env.count(kSecretVariable)) << "rank " << local_rank << " got no store secret";
      secrets.insert(env.at(kSecretVariable));
    }
  }
  ASSERT_EQ(secrets.size(), 1U) << "the ranks (and restarts) of one job got different secrets";
  EXPECT_TRUE(is_long_hex(*secrets.begin())) << *secrets.begin();
  EXPECT_EQ(*secrets.begin(), job_store_secret());
}

TEST(JobSecret, ASecretTheUserExportedWins) {
  const std::string mine = "my-own-secret-of-32-characters!!";
  const EnvMap env = rank_environment(one_machine_plan(2), 1, 0, 0, {{kSecretVariable, mine}});
  EXPECT_EQ(env.at(kSecretVariable), mine);
  // Exported empty is unset: the job still gets one.
  const EnvMap empty = rank_environment(one_machine_plan(2), 1, 0, 0, {{kSecretVariable, ""}});
  EXPECT_EQ(empty.at(kSecretVariable), job_store_secret());
}

TEST(JobSecret, AJobOnSeveralMachinesGetsNoneFromTheLauncher) {
  LaunchPlan plan = one_machine_plan(2);
  plan.num_machines = 2;
  plan.world_size = 4;
  EXPECT_FALSE(rank_environment(plan, 0, 0, 0, {}).count(kSecretVariable));
  // Under torchrun's agent store acc has no gate to put in front of it.
  EXPECT_FALSE(rank_environment(one_machine_plan(2), 0, 0, 0, {{"TORCHELASTIC_USE_AGENT_STORE", "True"}})
                   .count(kSecretVariable));
}

// acc-launch as users run it: each job's ranks share a secret, two jobs have different ones, and the
// secret is in no command line (it travels in the environment, which only its owner can read).
TEST(JobSecret, EachJobOfAccLaunchHasItsOwnSecret) {
  Options options;
  options.timeout_s = 30;
  options.env[kSecretVariable] = std::nullopt;
  options.env["ACC_CONFIG_FILE"] = std::nullopt;
  options.env["XDG_CACHE_HOME"] = testing::temp_dir("job-secret-cache");
  std::vector<std::string> per_job;
  for (int job = 0; job < 2; ++job) {
    const Finished f = run({ACC_LAUNCH, "--num_processes", "2", "--main_process_port", "0", FAKE_RANK, "env",
                            kSecretVariable},
                           options);
    ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
    std::smatch match;
    std::set<std::string> seen;
    std::string out = f.out;
    const std::regex line(std::string("\\[rank[01]\\]: ") + kSecretVariable + "=([^\\n]*)");
    while (std::regex_search(out, match, line)) {
      seen.insert(match[1]);
      out = match.suffix();
    }
    ASSERT_EQ(seen.size(), 1U) << "the two ranks got different secrets, or none printed\n" << f.out;
    ASSERT_TRUE(is_long_hex(*seen.begin())) << f.out;
    EXPECT_THAT(f.err, ::testing::Not(HasSubstr(*seen.begin()))) << "the launcher printed the secret";
    per_job.push_back(*seen.begin());
  }
  EXPECT_NE(per_job[0], per_job[1]) << "two jobs got the same secret";
}

}  // namespace
}  // namespace acc::launcher
