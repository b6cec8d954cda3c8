// acc-launch as a user runs it: real processes on loopback, each test with a hard timeout, and every
// process it starts accounted for.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "test_process.h"

namespace acc::launcher::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> launch(std::vector<std::string> args) {
  args.insert(args.begin(), ACC_LAUNCH);
  return args;
}

// The environment of a test run: no config files from the machine, a fixed thread count.
Options clean(double timeout_s = 20) {
  Options options;
  options.timeout_s = timeout_s;
  options.env["XDG_CACHE_HOME"] = temp_dir("cache-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  options.env["HF_HOME"] = std::nullopt;
  options.env["ACC_CONFIG_FILE"] = std::nullopt;
  options.env["OMP_NUM_THREADS"] = std::nullopt;
  for (const char* slurm : {"SLURM_STEP_ID", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_JOB_NODELIST"})
    options.env[slurm] = std::nullopt;
  return options;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<pid_t> read_pids(const std::string& dir, int count) {
  std::vector<pid_t> pids;
  for (int r = 0; r < count; ++r) pids.push_back(std::atoi(read_text(dir + "/rank_" + std::to_string(r) + ".pid").c_str()));
  return pids;
}

bool all_gone(const std::vector<pid_t>& pids, double within_s) {
  const auto start = std::chrono::steady_clock::now();
  while (seconds_since(start) < within_s) {
    if (std::none_of(pids.begin(), pids.end(), alive)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int listening_socket(int& port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  listen(fd, 1);
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  port = ntohs(address.sin_port);
  return fd;
}

TEST(AccLaunch, HelpAndVersion) {
  const Finished help = run(launch({"--help"}), clean());
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("Usage: acc-launch [options] PROGRAM [PROGRAM ARGS...]"));
  for (const char* flag : {"--config_file", "--num_processes", "--num_machines", "--machine_rank", "--main_process_ip",
                           "--main_process_port", "--cpu", "--multi_gpu", "--gpu_ids", "--mixed_precision",
                           "--gradient_accumulation_steps", "--use_fsdp", "--fsdp_sharding_strategy", "--max_restarts",
                           "--monitor_interval", "--tee", "--log_dir", "--quiet", "--debug", "--version"})
    EXPECT_THAT(help.out, HasSubstr(flag));
  EXPECT_THAT(help.out, HasSubstr("Exit status"));
  const Finished version = run(launch({"--version"}), clean());
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, ::testing::StartsWith("acc-launch (acc) 0.1.0 (git "));
}

TEST(AccLaunch, UsageErrorsNameTheProblemAndExitTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--num_proces", "2", FAKE_RANK}, "error: unknown flag '--num_proces' (did you mean '--num_processes'?)"},
      {{}, "error: no program given"},
      {{"--mixed_precision", "fp17", FAKE_RANK}, "bad value 'fp17'; allowed values: no, fp16, bf16, fp8"},
      {{"--num_processes", "zero", FAKE_RANK}, "--num_processes"},
      {{"--cpu", "--multi_gpu", FAKE_RANK}, "use only one of --cpu, --multi_gpu and --use_fsdp"},
      {{"--multi_gpu", "-n", "1", FAKE_RANK}, "--multi_gpu needs at least 2 processes"},
      {{"--tee", "3", FAKE_RANK}, "add --log_dir DIR"},
      {{"--fsdp_offload_params", "perhaps", FAKE_RANK}, "allowed values: true, false"},
      {{"--config_file", "/nonexistent/c.yaml", FAKE_RANK}, "cannot read config file '/nonexistent/c.yaml'"},
  };
  for (const auto& c : cases) {
    const Finished f = run(launch(c.args), clean());
    EXPECT_EQ(f.exit_code, 2) << c.message;
    EXPECT_THAT(f.err, HasSubstr(c.message));
    EXPECT_THAT(f.err, ::testing::StartsWith("acc-launch: error: "));
  }
}

TEST(AccLaunch, NumericFlagsNameTheFlagAndTheAllowedValuesOnOneLine) {
  // Issue 19: CLI11's own checks printed "Value 0 not in range 0.000000 to 1797693...": 309 digits.
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string processes = "--num_processes: bad value ";
  const std::string port = "; expected a port 0-65535 (0 = a free port)";
  const std::vector<Case> cases = {
      {{"-n", "0"}, processes + "'0'; expected an integer >= 1"},
      {{"-n", "abc"}, processes + "'abc'; expected an integer >= 1"},
      {{"-n", "-3"}, processes + "'-3'; expected an integer >= 1"},
      {{"--num-processes", "2.5"}, processes + "'2.5'; expected an integer >= 1"},
      {{"-n", "99999999999"}, processes + "'99999999999'; expected an integer >= 1 (at most 1000000000)"},
      {{"--num_machines", "0"}, "--num_machines: bad value '0'; expected an integer >= 1"},
      {{"--num_machines", "two"}, "--num_machines: bad value 'two'; expected an integer >= 1"},
      {{"--machine_rank", "-1"}, "--machine_rank: bad value '-1'; expected an integer >= 0"},
      {{"--main_process_port", "70000"}, "--main_process_port: bad value '70000'" + port},
      {{"--main_process_port", "-1"}, "--main_process_port: bad value '-1'" + port},
      {{"--main-process-port", "http"}, "--main_process_port: bad value 'http'" + port},
      {{"--num_cpu_threads_per_process", "0"},
       "--num_cpu_threads_per_process: bad value '0'; expected an integer >= 1"},
      {{"--gradient_accumulation_steps", "x"},
       "--gradient_accumulation_steps: bad value 'x'; expected an integer >= 1"},
      {{"--max_restarts", "-1"}, "--max_restarts: bad value '-1'; expected an integer >= 0"},
      {{"-t", "5"}, "--tee: bad value '5'; expected 0, 1, 2 or 3 (1 stdout, 2 stderr, 3 both)"},
      {{"--monitor_interval", "0"}, "--monitor_interval: bad value '0'; expected seconds from 0.001 to 60"},
      {{"--grace_period", "soon"}, "--grace_period: bad value 'soon'; expected seconds from 0 to 3600"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = c.args;
    args.push_back(FAKE_RANK);
    const Finished f = run(launch(args), clean());
    EXPECT_EQ(f.exit_code, 2) << c.message;
    EXPECT_EQ(f.err, "acc-launch: error: " + c.message + " (see acc-launch --help)\n");
    EXPECT_EQ(f.out, "");
  }
  // The limits themselves are allowed.
  const Finished edge =
      run(launch({"-q", "-n", "1", "--main_process_port", "65535", "--machine_rank", "0", "--max_restarts", "0",
                  "--tee", "0", "--grace_period", "0", FAKE_RANK, "say", "ok"}),
          clean());
  EXPECT_EQ(edge.exit_code, 0) << edge.err;
  EXPECT_EQ(edge.out, "ok\n");
}

TEST(AccLaunch, MainProcessIpMustBeAnAddressOrAHostName) {
  // Issue 19: --main_process_ip took any text and handed it to the ranks as MASTER_ADDR.
  for (const std::string bad : {"1.2.3.4.5", "999.1.1.1", "a b", ""}) {
    const Finished f = run(launch({"--main_process_ip", bad, FAKE_RANK}), clean());
    EXPECT_EQ(f.exit_code, 2) << bad;
    EXPECT_EQ(f.err, "acc-launch: error: --main_process_ip: bad value '" + bad +
                         "'; expected an IPv4 address (10.0.0.1), an IPv6 address (fd00::1) or a host name "
                         "(node-0.example.com) (see acc-launch --help)\n");
  }
  // A well-formed name is not looked up: it reaches the ranks as it is.
  const Finished f =
      run(launch({"-q", "--main_process_ip", "node-0.invalid", FAKE_RANK, "env", "MASTER_ADDR"}), clean());
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(f.out, "MASTER_ADDR=node-0.invalid\n");
}

TEST(AccLaunch, ProgramNotFoundExits127) {
  const Finished f = run(launch({"-n", "2", "--main_process_port", "0", "./no-such-program"}), clean());
  EXPECT_EQ(f.exit_code, 127);
  EXPECT_THAT(f.err, HasSubstr("cannot execute './no-such-program': No such file or directory"));
}

TEST(AccLaunch, MissingProgramGetsAHintThatFitsHowItWasNamed) {
  // Issue 19: every missing program got "(give a path like ./PROGRAM ...)", so /no/such/prog was suggested
  // back as .//no/such/prog. Only a bare name is searched in PATH, and only a bare name that is in the
  // current directory is fixed by ./ in front of it.
  Options options = clean();
  const std::string dir = temp_dir("missing-program");
  options.cwd = dir;
  const std::string local = "acc-test-program-in-cwd";
  std::ofstream(dir + "/" + local) << "#!/bin/sh\nexit 0\n";
  std::ofstream(dir + "/no-interpreter") << "#!/no/such/interpreter\n";
  for (const char* script : {"/no-interpreter", "/acc-test-program-in-cwd"})
    ASSERT_EQ(chmod((dir + script).c_str(), 0755), 0);
  const std::string missing = ": No such file or directory";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/no/such/prog", missing + " (check the path)"},
      {"no/such/prog", missing + " (check the path)"},
      {"./no-such-prog", missing + " (check the path)"},
      {"acc-no-such-program",
       missing + " (not found in any directory of PATH; give its path, or add its directory to PATH)"},
      {local, missing +
                  " (a name without '/' is looked up in PATH only; to run the one in the current directory, give ./" +
                  local + ")"},
      {"./no-interpreter",
       missing + " (the file exists: the interpreter on its #! line, or its dynamic loader, is missing)"},
  };
  for (const auto& [program, hint] : cases) {
    const Finished f = run(launch({"-q", "-n", "1", program}), options);
    EXPECT_EQ(f.exit_code, 127) << program;
    EXPECT_EQ(f.err, "acc-launch: cannot execute '" + program + "'" + hint + "\n");
  }
}

TEST(AccLaunch, RanksGetTheirEnvironmentAndBothFlagSpellingsWork) {
  const Finished f = run(launch({"--num-processes", "3", "--main-process-port", "0", "--mixed_precision", "bf16", FAKE_RANK,
                                 "env", "RANK", "env", "LOCAL_RANK", "env", "WORLD_SIZE", "env", "LOCAL_WORLD_SIZE", "env",
                                 "GROUP_RANK", "env", "MASTER_ADDR", "env", "ACCELERATE_MIXED_PRECISION", "env",
                                 "ACCELERATE_USE_CPU", "env", "OMP_NUM_THREADS", "env", "MASTER_PORT"}),
                         clean());
  ASSERT_EQ(f.exit_code, 0) << f.err;
  for (int r = 0; r < 3; ++r) {
    const std::string p = "[rank" + std::to_string(r) + "]: ";
    EXPECT_THAT(f.out, HasSubstr(p + "RANK=" + std::to_string(r) + "\n"));
    EXPECT_THAT(f.out, HasSubstr(p + "LOCAL_RANK=" + std::to_string(r) + "\n"));
    EXPECT_THAT(f.out, HasSubstr(p + "WORLD_SIZE=3\n"));
    EXPECT_THAT(f.out, HasSubstr(p + "LOCAL_WORLD_SIZE=3\n"));
    EXPECT_THAT(f.out, HasSubstr(p + "GROUP_RANK=0\n"));
    EXPECT_THAT(f.out, HasSubstr(p + "MASTER_ADDR=127.0.0.1\n"));
    EXPECT_THAT(f.out, HasSubstr(p + "ACCELERATE_MIXED_PRECISION=bf16\n"));
    EXPECT_THAT(f.out, HasSubstr(p + "ACCELERATE_USE_CPU=False\n"));
    EXPECT_THAT(f.out, ::testing::ContainsRegex("\\[rank" + std::to_string(r) + "\\]: OMP_NUM_THREADS=[1-9]"));
  }
  EXPECT_THAT(f.out, Not(HasSubstr("MASTER_PORT=29500")));  // port 0 picked a free port
  EXPECT_THAT(f.out, Not(HasSubstr("MASTER_PORT=0")));
}

TEST(AccLaunch, EachRankLeadsASessionOfItsOwn) {
  // As under torchrun: with autogroup scheduling, a session is what gets a fair share of the CPUs.
  const Finished f = run(launch({"-n", "2", "--main_process_port", "0", FAKE_RANK, "session"}), clean());
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_THAT(f.out, HasSubstr("[rank0]: SESSION_LEADER=yes\n"));
  EXPECT_THAT(f.out, HasSubstr("[rank1]: SESSION_LEADER=yes\n"));
}

TEST(AccLaunch, OutputIsWholeLinesOnTheRightStream) {
  const Finished f = run(launch({"-n", "2", "--main_process_port", "0", FAKE_RANK, "say", "out line", "err", "err line"}), clean());
  ASSERT_EQ(f.exit_code, 0);
  EXPECT_THAT(f.out, HasSubstr("[rank0]: out line\n"));
  EXPECT_THAT(f.out, HasSubstr("[rank1]: out line\n"));
  EXPECT_THAT(f.out, Not(HasSubstr("err line")));
  EXPECT_THAT(f.err, HasSubstr("[rank1]: err line\n"));

  // One process: the program's output unchanged, plus the note on how to ask for more processes.
  const Finished single = run(launch({FAKE_RANK, "say", "alone"}), clean());
  EXPECT_EQ(single.out, "alone\n");
  EXPECT_THAT(single.err, HasSubstr("ask for more with --num_processes N"));
  const Finished quiet = run(launch({"-q", FAKE_RANK, "say", "alone"}), clean());
  EXPECT_EQ(quiet.err, "");
  // "--" ends acc-launch's options; what follows is the program's, even when it looks like a flag.
  const Finished separated = run(launch({"-q", "--", FAKE_RANK, "say", "--num_processes"}), clean());
  EXPECT_EQ(separated.exit_code, 0);
  EXPECT_EQ(separated.out, "--num_processes\n");
}

TEST(AccLaunch, LogDirWritesOneFilePerRankAndTeeCopiesToConsole) {
  const std::string dir = temp_dir("logs");
  const Finished f = run(launch({"-n", "2", "--main_process_port", "0", "--log_dir", dir, FAKE_RANK, "say", "hi", "err", "oops"}),
                         clean());
  ASSERT_EQ(f.exit_code, 0);
  EXPECT_EQ(read_text(dir + "/attempt_0/rank_1/stdout.log"), "hi\n");
  EXPECT_EQ(read_text(dir + "/attempt_0/rank_1/stderr.log"), "oops\n");
  EXPECT_THAT(f.out, Not(HasSubstr("hi")));
  const Finished tee = run(launch({"-n", "2", "--main_process_port", "0", "--log_dir", dir, "--tee", "1", FAKE_RANK, "say",
                                   "hi", "err", "oops"}),
                           clean());
  EXPECT_THAT(tee.out, HasSubstr("[rank0]: hi\n"));
  EXPECT_THAT(tee.err, Not(HasSubstr("oops")));
}

// What a link planted at a name acc-launch writes must not change: its target's bytes and mode.
struct Victim {
  std::string path;
  std::string text;
  mode_t mode;
};

Victim plant_victim(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  chmod(path.c_str(), 0600);
  return {path, text, 0600};
}

void expect_untouched(const Victim& victim) {
  struct stat info {};
  ASSERT_EQ(lstat(victim.path.c_str(), &info), 0) << victim.path;
  EXPECT_TRUE(S_ISREG(info.st_mode)) << victim.path;
  EXPECT_EQ(info.st_mode & 07777, victim.mode) << victim.path;
  EXPECT_EQ(read_text(victim.path), victim.text) << victim.path;
}

void expect_regular_file(const std::string& path, const std::string& text) {
  struct stat info {};
  ASSERT_EQ(lstat(path.c_str(), &info), 0) << path;
  EXPECT_TRUE(S_ISREG(info.st_mode)) << path << " is not a regular file";
  EXPECT_EQ(read_text(path), text) << path;
}

// Rank logs have predictable names (DIR/attempt_K/rank_R/stdout.log): a link planted at one, to a file
// or to a name not yet there, is replaced by the log, never written through, and the job runs.
TEST(AccLaunch, LinksPlantedAtLogFileNamesAreReplacedNeverFollowed) {
  const std::string dir = temp_dir("log-file-links");
  const std::string logs = dir + "/logs";
  std::filesystem::create_directories(logs + "/attempt_0/rank_0");
  std::filesystem::create_directories(logs + "/attempt_0/rank_1");
  const Victim victim = plant_victim(dir + "/victim", "the victim's own bytes\n");
  const std::string not_yet_there = dir + "/created-through-a-link";
  for (const char* name : {"rank_0/stdout.log", "rank_0/stderr.log", "rank_1/stderr.log"})
    ASSERT_EQ(symlink(victim.path.c_str(), (logs + "/attempt_0/" + name).c_str()), 0);
  ASSERT_EQ(symlink(not_yet_there.c_str(), (logs + "/attempt_0/rank_1/stdout.log").c_str()), 0);

  const Finished f = run(launch({"-n", "2", "--main_process_port", "0", "--log_dir", logs, FAKE_RANK, "say", "hi", "err", "oops"}),
                         clean());
  ASSERT_EQ(f.exit_code, 0) << f.err;
  expect_untouched(victim);
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::symlink_status(not_yet_there)));
  for (const char* rank : {"rank_0", "rank_1"}) {
    expect_regular_file(logs + "/attempt_0/" + rank + "/stdout.log", "hi\n");
    expect_regular_file(logs + "/attempt_0/" + rank + "/stderr.log", "oops\n");
  }
  // Nothing but the logs is left beside them (no temporaries).
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(logs + "/attempt_0/rank_1"))
    names.push_back(entry.path().filename().string());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("stdout.log", "stderr.log"));
}

// A link at a log directory's name (attempt_K, rank_R) is refused before any rank of the attempt starts:
// following it would put the logs over the files of the directory it points to, and acc-launch never
// makes one there.
TEST(AccLaunch, LinksPlantedAtLogDirectoryNamesAreRefusedBeforeAnyRankStarts) {
  const std::string dir = temp_dir("log-directory-links");
  const std::string victim_dir = dir + "/victim_dir";
  std::filesystem::create_directories(victim_dir + "/rank_0");
  const Victim victim = plant_victim(victim_dir + "/rank_0/stdout.log", "the victim's own log\n");
  const std::string pids = dir + "/pids";
  std::filesystem::create_directories(pids);
  auto expect_victim_dir_untouched = [&] {
    expect_untouched(victim);
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(victim_dir))
      names.push_back(entry.path().lexically_relative(victim_dir).string());
    EXPECT_THAT(names, ::testing::UnorderedElementsAre("rank_0", "rank_0/stdout.log"));
  };

  // attempt_0 itself.
  const std::string logs = dir + "/logs";
  std::filesystem::create_directories(logs);
  ASSERT_EQ(symlink(victim_dir.c_str(), (logs + "/attempt_0").c_str()), 0);
  Finished f = run(launch({"-n", "2", "--main_process_port", "0", "--log_dir", logs, FAKE_RANK, "pidfile", pids, "say", "hi"}),
                   clean());
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("acc-launch: error: '" + logs + "/attempt_0' is a symbolic link;"));
  EXPECT_THAT(f.err, HasSubstr("remove it, or choose another --log_dir"));
  EXPECT_TRUE(std::filesystem::is_empty(pids)) << "a rank started";
  expect_victim_dir_untouched();

  // rank_1 (rank 0's directory is fine): still no rank starts.
  const std::string logs2 = dir + "/logs2";
  std::filesystem::create_directories(logs2 + "/attempt_0");
  ASSERT_EQ(symlink(victim_dir.c_str(), (logs2 + "/attempt_0/rank_1").c_str()), 0);
  f = run(launch({"-n", "2", "--main_process_port", "0", "--log_dir", logs2, FAKE_RANK, "pidfile", pids, "say", "hi"}), clean());
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("'" + logs2 + "/attempt_0/rank_1' is a symbolic link;"));
  EXPECT_TRUE(std::filesystem::is_empty(pids)) << "a rank started";
  expect_victim_dir_untouched();

  // The attempt after a restart: attempt 0 runs, attempt 1 is refused.
  const std::string logs3 = dir + "/logs3";
  std::filesystem::create_directories(logs3);
  ASSERT_EQ(symlink(victim_dir.c_str(), (logs3 + "/attempt_1").c_str()), 0);
  f = run(launch({"-n", "2", "--main_process_port", "0", "--max_restarts", "1", "--log_dir", logs3, FAKE_RANK,
                  "@1:fail-first-attempt", "5", "say", "hi"}),
          clean());
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("restarting all ranks (restart 1 of 1)"));
  EXPECT_THAT(f.err, HasSubstr("'" + logs3 + "/attempt_1' is a symbolic link;"));
  // (Whether rank 0 said hi before rank 1's failure stopped it is a race; its log is there either way.)
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(logs3 + "/attempt_0/rank_0/stdout.log")));
  expect_victim_dir_untouched();

  // Not a directory at all: named, not a crash.
  const std::string logs4 = dir + "/logs4";
  std::filesystem::create_directories(logs4);
  std::ofstream(logs4 + "/attempt_0") << "a file\n";
  f = run(launch({"--log_dir", logs4, FAKE_RANK, "say", "hi"}), clean());
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("acc-launch: error: cannot open the log directory '" + logs4 +
                               "/attempt_0': Not a directory; remove what is there, or choose another --log_dir"));
  f = run(launch({"--log_dir", logs4 + "/attempt_0/below_a_file", FAKE_RANK, "say", "hi"}), clean());
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("acc-launch: error: --log_dir '" + logs4 + "/attempt_0/below_a_file' cannot be created: '" +
                               logs4 + "/attempt_0' is a regular file, not a directory; choose a directory for --log_dir"));
}

TEST(AccLaunch, FailingRankStopsTheOthersAndIsReported) {
  const auto start = std::chrono::steady_clock::now();
  const Finished f = run(launch({"-n", "3", "--main_process_port", "0", FAKE_RANK, "@1:say", "about to fail", "@1:exit", "3",
                                 "sleep", "30"}),
                         clean());
  EXPECT_LT(seconds_since(start), 10);
  EXPECT_EQ(f.exit_code, 3);
  EXPECT_THAT(f.err, ::testing::ContainsRegex("failed: rank 1 \\(local rank 1, pid [0-9]+\\) exited with code 3"));
  EXPECT_THAT(f.err, HasSubstr("its last lines:\n  | about to fail\n"));
}

TEST(AccLaunch, ARankThatLeftEarlyIsNamedWhenAPeerFailsAfterIt) {
  // Rank 2 ends its loop early and successfully; rank 0 then fails (as a collective would time out).
  const Finished f = run(launch({"-n", "3", "--main_process_port", "0", FAKE_RANK, "@2:exit", "0", "sleep", "0.5",
                                 "@0:exit", "7", "sleep", "30"}),
                         clean());
  EXPECT_EQ(f.exit_code, 7);
  EXPECT_THAT(f.err, ::testing::ContainsRegex("failed: rank 0 \\(local rank 0, pid [0-9]+\\) exited with code 7"));
  EXPECT_THAT(f.err, ::testing::ContainsRegex("rank 2 had already ended \\(exit code 0\\) [0-9.]+ s before; a rank that "
                                              "leaves while the others still run collectives makes them fail"));
  EXPECT_THAT(f.err, Not(HasSubstr("rank 1 had already ended")));
}

TEST(AccLaunch, RankKilledBySigkillEndsAllRanksWithinFiveSeconds) {
  const std::string dir = temp_dir("sigkill");
  const auto start = std::chrono::steady_clock::now();
  const Finished f = run(launch({"-n", "3", "--main_process_port", "0", FAKE_RANK, "pidfile", dir, "sleep", "0.3", "@2:kill",
                                 "9", "sleep", "60"}),
                         clean());
  EXPECT_LT(seconds_since(start), 5.3);
  EXPECT_EQ(f.exit_code, 128 + SIGKILL);
  EXPECT_THAT(f.err, HasSubstr("rank 2 (local rank 2, pid"));
  EXPECT_THAT(f.err, HasSubstr("was killed by signal 9 (SIGKILL)"));
  EXPECT_TRUE(all_gone(read_pids(dir, 3), 0.5));
}

TEST(AccLaunch, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  const auto start = std::chrono::steady_clock::now();
  const Finished f = run(launch({"-n", "2", "--main_process_port", "0", "--grace_period", "0.5", FAKE_RANK, "ignore-term",
                                 "@1:exit", "1", "sleep", "60"}),
                         clean());
  EXPECT_LT(seconds_since(start), 5);
  EXPECT_EQ(f.exit_code, 1);
}

TEST(AccLaunch, SigintReachesEveryRank) {
  const std::string dir = temp_dir("sigint");
  Process launcher(launch({"-n", "2", "--main_process_port", "0", FAKE_RANK, "trap", dir, "say", "ready", "sleep", "60"}),
                   clean());
  ASSERT_TRUE(launcher.wait_for_output("[rank0]: ready", 10));
  ASSERT_TRUE(launcher.wait_for_output("[rank1]: ready", 10));
  launcher.signal(SIGINT);
  const Finished f = launcher.wait();
  EXPECT_EQ(f.exit_code, 128 + SIGINT);
  EXPECT_THAT(f.err, HasSubstr("got SIGINT: passing it to every rank"));
  EXPECT_EQ(read_text(dir + "/rank_0.signal"), "SIGINT");
  EXPECT_EQ(read_text(dir + "/rank_1.signal"), "SIGINT");
}

TEST(AccLaunch, KillingTheLauncherWithSigkillLeavesNoProcessBehind) {
  const std::string dir = temp_dir("orphans");
  Process launcher(launch({"-n", "3", "--main_process_port", "0", FAKE_RANK, "ignore-term", "pidfile", dir, "say", "ready",
                           "sleep", "60"}),
                   clean());
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(launcher.wait_for_output("[rank" + std::to_string(r) + "]: ready", 10));
  const std::vector<pid_t> ranks = read_pids(dir, 3);
  kill(launcher.pid(), SIGKILL);
  launcher.wait();
  EXPECT_TRUE(all_gone(ranks, 3));
}

TEST(AccLaunch, MaxRestartsRestartsTheGroupOnce) {
  const Finished once = run(launch({"-n", "2", "--main_process_port", "0", "--max_restarts", "1", FAKE_RANK, "@1:fail-first-attempt",
                                    "5", "env", "TORCHELASTIC_RESTART_COUNT"}),
                            clean());
  EXPECT_EQ(once.exit_code, 0) << once.err;
  EXPECT_THAT(once.err, HasSubstr("restarting all ranks (restart 1 of 1)"));
  EXPECT_THAT(once.out, HasSubstr("[rank1]: TORCHELASTIC_RESTART_COUNT=1"));

  const Finished never = run(launch({"-n", "2", "--main_process_port", "0", FAKE_RANK, "@1:fail-first-attempt", "5"}), clean());
  EXPECT_EQ(never.exit_code, 5);
  EXPECT_THAT(never.err, Not(HasSubstr("restarting")));
}

TEST(AccLaunch, PortInUseIsAnErrorNamingPortAndFlag) {
  int port = 0;
  const int fd = listening_socket(port);
  const Finished f = run(launch({"-n", "2", "--main_process_port", std::to_string(port), FAKE_RANK}), clean());
  close(fd);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("error: port " + std::to_string(port) +
                               " (--main_process_port) is already in use on this machine; choose another with "
                               "--main_process_port N, or --main_process_port 0 for a free one"));
}

TEST(AccLaunch, FlagsOverrideConfigFileOverridesDefaults) {
  Options options = clean();
  const std::string cache = *options.env["XDG_CACHE_HOME"];
  const std::vector<std::string> show = {FAKE_RANK, "env", "WORLD_SIZE", "env", "ACCELERATE_MIXED_PRECISION", "env",
                                         "ACCELERATE_USE_FSDP", "env", "FSDP_SHARDING_STRATEGY"};
  auto launch_with = [&](std::vector<std::string> flags) {
    flags.insert(flags.end(), show.begin(), show.end());
    return run(launch(flags), options);
  };
  // Defaults.
  Finished f = launch_with({"--main_process_port", "0"});
  EXPECT_THAT(f.out, HasSubstr("WORLD_SIZE=1\n"));
  EXPECT_THAT(f.out, HasSubstr("ACCELERATE_MIXED_PRECISION=no\n"));
  // acc's default config file.
  std::filesystem::create_directories(cache + "/acc");
  std::ofstream(cache + "/acc/default_config.yaml")
      << "distributed_type: FSDP\nnum_processes: 2\nmixed_precision: bf16\nmain_process_port: 0\n"
         "fsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n";
  f = launch_with({});
  EXPECT_THAT(f.out, HasSubstr("[rank1]: WORLD_SIZE=2\n"));
  EXPECT_THAT(f.out, HasSubstr("[rank1]: ACCELERATE_MIXED_PRECISION=bf16\n"));
  EXPECT_THAT(f.out, HasSubstr("[rank1]: ACCELERATE_USE_FSDP=true\n"));
  EXPECT_THAT(f.out, HasSubstr("[rank1]: FSDP_SHARDING_STRATEGY=SHARD_GRAD_OP\n"));
  // Flags win over it.
  f = launch_with({"-n", "3", "--mixed-precision", "fp16", "--fsdp_sharding_strategy", "no_shard"});
  EXPECT_THAT(f.out, HasSubstr("[rank2]: WORLD_SIZE=3\n"));
  EXPECT_THAT(f.out, HasSubstr("[rank2]: ACCELERATE_MIXED_PRECISION=fp16\n"));
  EXPECT_THAT(f.out, HasSubstr("[rank2]: FSDP_SHARDING_STRATEGY=NO_SHARD\n"));
  // --config_file wins over the default file; Accelerate's JSON works unchanged.
  std::ofstream(cache + "/other.json") << R"({"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_CPU",
    "num_processes": 4, "use_cpu": true, "mixed_precision": "no", "main_process_port": 0, "debug": false})";
  f = launch_with({"--config_file", cache + "/other.json"});
  EXPECT_THAT(f.out, HasSubstr("[rank3]: WORLD_SIZE=4\n"));
  EXPECT_THAT(f.out, HasSubstr("[rank3]: ACCELERATE_USE_FSDP=<unset>\n"));
}

TEST(AccLaunch, ConfigErrorsStopBeforeAnythingStarts) {
  Options options = clean();
  const std::string path = *options.env["XDG_CACHE_HOME"] + "/bad.yaml";
  std::ofstream(path) << "distributed_type: MULTI_CPU\nnum_procesess: 2\n";
  const Finished f = run(launch({"--config_file", path, FAKE_RANK, "say", "started"}), options);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_EQ(f.err, "acc-launch: error: " + path +
                       ":2:1: unknown key 'num_procesess' (did you mean 'num_processes'?); remove it or fix its spelling\n");
  EXPECT_EQ(f.out, "");
}

TEST(AccLaunch, ConfigValueErrorsNameFileLineKeyAndAllowedValues) {
  // Issue 19: these were reported as the flags --num_processes/--main_process_port, without the file.
  Options options = clean();
  const std::string dir = *options.env["XDG_CACHE_HOME"];
  struct Case {
    std::string text;
    std::string message;  // after "<path>:"
  };
  const std::vector<Case> cases = {
      {"distributed_type: NO\nnum_processes: 0\n",
       "2:16: num_processes: bad value '0'; expected an integer >= 1, or -1 (give it on the command line)"},
      {"distributed_type: NO\nmain_process_port: 70000\n",
       "2:20: main_process_port: bad value '70000'; expected a port 0-65535 (0 = a free port)"},
      {"distributed_type: NO\nmain_process_ip: 999.1.1.1\n",
       "2:18: main_process_ip: bad value '999.1.1.1'; expected an IPv4 address (10.0.0.1), an IPv6 address (fd00::1) "
       "or "
       "a host name (node-0.example.com)"},
      {"distributed_type: NO\nnum_processes: 2\nnum_processes: 3\n",
       "3:1: duplicate key 'num_processes', first set on line 2; keep only one of them"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = dir + "/c" + std::to_string(i) + ".yaml";
    std::ofstream(path) << cases[i].text;
    const Finished f = run(launch({"--config_file", path, FAKE_RANK, "say", "started"}), options);
    EXPECT_EQ(f.exit_code, 2) << cases[i].message;
    EXPECT_EQ(f.err, "acc-launch: error: " + path + ":" + cases[i].message + "\n");
    EXPECT_EQ(f.out, "");
  }
}

TEST(AccLaunch, ConfigThatIsNotARegularFileIsRefusedWithoutBlocking) {
  // Issue 19: a FIFO or /dev/zero as the config blocked forever (or read zeros until memory ran out).
  Options options = clean(5);
  const std::string dir = *options.env["XDG_CACHE_HOME"];
  const std::string fifo = dir + "/fifo.yaml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_directories(dir + "/configs");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {fifo, "a named pipe (FIFO)"}, {"/dev/zero", "a character device"}, {dir + "/configs", "a directory"}};
  for (const auto& [path, kind] : cases) {
    const auto start = std::chrono::steady_clock::now();
    const Finished f = run(launch({"--config_file", path, FAKE_RANK, "say", "started"}), options);
    EXPECT_FALSE(f.timed_out) << path;
    EXPECT_LT(seconds_since(start), 3) << path;
    EXPECT_EQ(f.exit_code, 2) << path;
    EXPECT_EQ(f.err, "acc-launch: error: config file '" + path + "' is " + kind +
                         ", not a regular file; give --config_file the path of a YAML or JSON config (`acc-config` "
                         "writes one)\n");
    EXPECT_EQ(f.out, "");
  }
}

// Two launchers, machine 0 and machine 1 on loopback, meet at the static rendezvous: rank 0 listens on
// MASTER_ADDR:MASTER_PORT and ranks 1-3 (two of them started by the other launcher) connect to it.
void expect_two_machines_meet(const std::vector<std::string>& machine0, const std::vector<std::string>& machine1,
                              const Options& options0, const Options& options1) {
  Process first(launch(machine0), options0);
  Process second(launch(machine1), options1);
  const Finished a = first.wait();
  const Finished b = second.wait();
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_THAT(a.out, HasSubstr("[rank0]: rendezvous complete, met ranks: 1 2 3"));
  EXPECT_THAT(b.out, HasSubstr("[rank3]: GROUP_RANK=1"));
}

TEST(AccLaunch, TwoMachinesOnLoopback) {
  int port = 0;
  close(listening_socket(port));
  std::vector<std::string> common = {"--num_processes", "4", "--num_machines", "2", "--main_process_ip", "127.0.0.1",
                                     "--main_process_port", std::to_string(port)};
  std::vector<std::string> m0 = common, m1 = common;
  m0.insert(m0.end(), {"--machine_rank", "0", FAKE_RANK, "rendezvous", "env", "GROUP_RANK"});
  m1.insert(m1.end(), {"--machine_rank", "1", FAKE_RANK, "rendezvous", "env", "GROUP_RANK"});
  expect_two_machines_meet(m0, m1, clean(), clean());
}

TEST(AccLaunch, SrunStartsOneLauncherPerNode) {
  // What `srun --nodes 2 --ntasks-per-node 1 acc-launch -n 4 ...` sets on each node.
  int port = 0;
  close(listening_socket(port));
  auto node = [&](int id) {
    Options options = clean();
    options.env["SLURM_STEP_ID"] = "0";
    options.env["SLURM_NNODES"] = "2";
    options.env["SLURM_NTASKS"] = "2";
    options.env["SLURM_NODEID"] = std::to_string(id);
    options.env["SLURM_JOB_NODELIST"] = "127.0.0.1,127.0.0.2";
    return options;
  };
  const std::vector<std::string> args = {"-n", "4", "--main_process_port", std::to_string(port), FAKE_RANK, "rendezvous",
                                         "env", "GROUP_RANK"};
  expect_two_machines_meet(args, args, node(0), node(1));
}

}  // namespace
}  // namespace acc::launcher::testing
