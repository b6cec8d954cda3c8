// Paths that are not what a command expects (a directory, a FIFO, a device, a file for a directory, a
// YAML alias bomb), given to acc-launch, acc-test, acc-config and acc-env as users would: each is refused
// with one line naming what it is and the fix, exit 2, before any rank starts, and nothing blocks (the
// hard timeouts here are far under the 10 s these cases used to hang for). Every path is the test's own
// (a device node is made with mknod in its directory when the test runs as root): nothing under /dev is
// written, and /dev/zero and /dev/null are only named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "test_process.h"

namespace acc::launcher::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Far under the 10 s these inputs blocked for, and far over what refusing them takes (milliseconds).
constexpr double kHardTimeout = 5;

struct Timed {
  Finished finished;
  double seconds = 0;
};

Timed timed_run(const std::vector<std::string>& argv, const Options& options) {
  const auto start = std::chrono::steady_clock::now();
  Timed result{run(argv, options), 0};
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

// No config from the machine; the test's own directory for everything else.
Options clean(const std::string& dir) {
  Options options;
  options.timeout_s = kHardTimeout;
  options.env["XDG_CACHE_HOME"] = dir + "/cache";
  options.env["HF_HOME"] = std::nullopt;
  options.env["ACC_CONFIG_FILE"] = std::nullopt;
  options.env["ACC_SELFTEST"] = std::nullopt;
  options.env["CUDA_VISIBLE_DEVICES"] = "";
  for (const char* slurm : {"SLURM_STEP_ID", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_NODEID", "SLURM_JOB_NODELIST"})
    options.env[slurm] = std::nullopt;
  return options;
}

std::string make_fifo(const std::string& path) {
  EXPECT_EQ(mkfifo(path.c_str(), 0600), 0) << path;
  return path;
}

// A program that would leave DIR/rank_0.pid behind had it started.
std::vector<std::string> fake_rank_writing_pid(const std::string& dir) { return {FAKE_RANK, "pidfile", dir}; }

void expect_refused(const Timed& t, const std::string& one_line) {
  EXPECT_FALSE(t.finished.timed_out) << "blocked: " << one_line;
  EXPECT_LT(t.seconds, kHardTimeout);
  EXPECT_EQ(t.finished.exit_code, 2) << t.finished.err;
  EXPECT_EQ(t.finished.err, one_line + "\n");
  EXPECT_EQ(t.finished.out, "");
}

TEST(BadInput, AProgramThatIsNotAFileIsRefusedBeforeAnythingReadsIt) {
  const std::string dir = temp_dir("bad-program");
  Options options = clean(dir);
  options.cwd = dir;
  const std::string fix = ", not a program; give the path of the program to start on every rank";
  make_fifo(dir + "/fifo");
  ASSERT_EQ(symlink("fifo", (dir + "/to-fifo").c_str()), 0);
  std::filesystem::create_directories(dir + "/folder");
  // Each of these once aborted (a directory: exit 134) or blocked past 10 s (a FIFO, /dev/zero).
  expect_refused(timed_run({ACC_LAUNCH, dir + "/folder"}, options),
                 "acc-launch: error: '" + dir + "/folder' is a directory" + fix);
  expect_refused(timed_run({ACC_LAUNCH, "./fifo", "--an-argument"}, options),
                 "acc-launch: error: './fifo' is a named pipe (FIFO)" + fix);
  expect_refused(timed_run({ACC_LAUNCH, "-n", "2", dir + "/to-fifo"}, options),
                 "acc-launch: error: '" + dir + "/to-fifo' is a symbolic link to a named pipe (FIFO)" + fix);
  expect_refused(timed_run({ACC_LAUNCH, "/dev/zero"}, options),
                 "acc-launch: error: '/dev/zero' is a character device" + fix);

  // A missing program is still exec's to report (127), as before.
  const Finished missing = run({ACC_LAUNCH, "-q", dir + "/no-such-program"}, options);
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_THAT(missing.err, HasSubstr("cannot execute '" + dir + "/no-such-program': No such file or directory"));
}

TEST(BadInput, ALogDirThatCannotBeADirectoryIsRefusedBeforeAnyRankStarts) {
  const std::string dir = temp_dir("bad-log-dir");
  const Options options = clean(dir);
  const std::string fix = "; choose a directory for --log_dir (it is created if missing)";
  const std::string file = dir + "/a-file";
  std::ofstream(file) << "kept\n";
  make_fifo(dir + "/fifo");
  // Each of these once ended in an uncaught exception (exit 134).
  expect_refused(timed_run({ACC_LAUNCH, "--log_dir", file, FAKE_RANK}, options),
                 "acc-launch: error: --log_dir '" + file + "' is a regular file, not a directory" + fix);
  expect_refused(timed_run({ACC_LAUNCH, "--log_dir", "/dev/null/x", FAKE_RANK}, options),
                 "acc-launch: error: --log_dir '/dev/null/x' cannot be created: '/dev/null' is a character device, "
                 "not a directory" + fix);
  expect_refused(timed_run({ACC_LAUNCH, "--log_dir", file + "/below/it", FAKE_RANK}, options),
                 "acc-launch: error: --log_dir '" + file + "/below/it' cannot be created: '" + file +
                     "' is a regular file, not a directory" + fix);
  expect_refused(timed_run({ACC_LAUNCH, "--log_dir", dir + "/fifo", "-n", "2", FAKE_RANK}, options),
                 "acc-launch: error: --log_dir '" + dir + "/fifo' is a named pipe (FIFO), not a directory" + fix);
  // No rank started: the program would have written its pid here.
  const std::string pids = dir + "/pids";
  std::filesystem::create_directories(pids);
  expect_refused(timed_run({ACC_LAUNCH, "--log_dir", file, "-n", "2", FAKE_RANK, "pidfile", pids}, options),
                 "acc-launch: error: --log_dir '" + file + "' is a regular file, not a directory" + fix);
  EXPECT_TRUE(std::filesystem::is_empty(pids));
  EXPECT_EQ(read_text(file), "kept\n");

  // A --log_dir that does not exist yet below a directory is still created, and the ranks run.
  const Finished fine = run({ACC_LAUNCH, "-q", "--log_dir", dir + "/new/logs", FAKE_RANK, "pidfile", pids}, options);
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/new/logs/attempt_0/rank_0/stdout.log"));
  EXPECT_TRUE(std::filesystem::exists(pids + "/rank_0.pid"));
}

// Accelerate refuses a config file it was pointed at that is not a file (load_config_from_file raises
// FileNotFoundError); ACC_CONFIG_FILE points at one file the same way, so it is an error, no longer a
// silent fall-back to the default config.
TEST(BadInput, AccConfigFileNamingNoConfigIsAnErrorNotIgnored) {
  const std::string dir = temp_dir("bad-acc-config-file");
  Options options = clean(dir);
  const std::string pids = dir + "/pids";
  std::filesystem::create_directories(pids);
  make_fifo(dir + "/fifo");
  // The default config exists: before, a bad ACC_CONFIG_FILE silently fell back to it.
  std::filesystem::create_directories(dir + "/cache/acc");
  std::ofstream(dir + "/cache/acc/default_config.yaml") << "distributed_type: 'NO'\n";
  const std::string which = "acc-launch: error: ACC_CONFIG_FILE names '";
  const std::string not_config =
      ", not a config file; point ACC_CONFIG_FILE at a config file (acc-config writes one), or unset it";

  options.env["ACC_CONFIG_FILE"] = dir + "/missing.yaml";
  expect_refused(timed_run({ACC_LAUNCH, FAKE_RANK, "pidfile", pids}, options),
                 which + dir + "/missing.yaml', which does not exist; write a config there with `acc-config default`, "
                                "or unset ACC_CONFIG_FILE");
  options.env["ACC_CONFIG_FILE"] = dir;
  expect_refused(timed_run({ACC_LAUNCH, FAKE_RANK, "pidfile", pids}, options),
                 which + dir + "', which is a directory" + not_config);
  options.env["ACC_CONFIG_FILE"] = dir + "/fifo";
  expect_refused(timed_run({ACC_LAUNCH, FAKE_RANK, "pidfile", pids}, options),
                 which + dir + "/fifo', which is a named pipe (FIFO)" + not_config);
  EXPECT_TRUE(std::filesystem::is_empty(pids));

  // acc-env reports it where the config would be, and ends normally.
  const Timed env = timed_run({ACC_ENV}, options);
  EXPECT_FALSE(env.finished.timed_out);
  EXPECT_EQ(env.finished.exit_code, 0);
  EXPECT_THAT(env.finished.out, HasSubstr("- acc-launch config: INVALID: ACC_CONFIG_FILE names '" + dir +
                                          "/fifo', which is a named pipe (FIFO)" + not_config));
}

TEST(BadInput, AccTestNamesWhatItsProgramIs) {
  const std::string dir = temp_dir("bad-selftest");
  Options options = clean(dir);
  make_fifo(dir + "/fifo");
  const std::string fix =
      ", not a program; build it with the runtime (target acc-selftest), or name it with --program PATH or ACC_SELFTEST";
  // A directory once aborted (exit 134); /dev/zero was "not found".
  expect_refused(timed_run({ACC_TEST, "--program", dir}, options),
                 "acc-test: error: the self-test program " + dir + " is a directory" + fix);
  expect_refused(timed_run({ACC_TEST, "--program", "/dev/zero"}, options),
                 "acc-test: error: the self-test program /dev/zero is a character device" + fix);
  options.env["ACC_SELFTEST"] = dir + "/fifo";
  expect_refused(timed_run({ACC_TEST}, options),
                 "acc-test: error: the self-test program " + dir + "/fifo is a named pipe (FIFO)" + fix);
}

// acc-env reads torch's version files from the directory ACC_TORCH_DIR names: a FIFO there once blocked
// it, a directory in a file's place made it abort. They are passed over as no version found.
TEST(BadInput, AccEnvReadsTorchVersionFilesOnlyWhenTheyAreRegularFiles) {
  const std::string dir = temp_dir("bad-torch-dir");
  Options options = clean(dir);
  options.env["ACC_VENV"] = dir + "/no-venv";
  make_fifo(dir + "/version.py");
  make_fifo(dir + "/build-version");
  options.env["ACC_TORCH_DIR"] = dir;
  Timed env = timed_run({ACC_ENV}, options);
  EXPECT_FALSE(env.finished.timed_out);
  EXPECT_EQ(env.finished.exit_code, 0) << env.finished.err;
  EXPECT_THAT(env.finished.out, HasSubstr("- libtorch: not found"));

  std::filesystem::remove(dir + "/build-version");
  std::filesystem::create_directories(dir + "/build-version");
  env = timed_run({ACC_ENV}, options);
  EXPECT_EQ(env.finished.exit_code, 0) << env.finished.err;
  EXPECT_THAT(env.finished.out, HasSubstr("- libtorch: not found"));
}

// What stat() says about a path, to compare before and after.
struct Node {
  mode_t mode = 0;
  ino_t inode = 0;
  dev_t rdev = 0;
  bool operator==(const Node& o) const { return mode == o.mode && inode == o.inode && rdev == o.rdev; }
};
Node node_of(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(lstat(path.c_str(), &info), 0) << path;
  return {info.st_mode, info.st_ino, info.st_rdev};
}

// `acc-config default --force --config_file /dev/null` once replaced the device with a regular file (as
// root it replaced /dev/full). The same nodes, made in the test's own directory, stay what they were.
TEST(BadInput, AccConfigNeverWritesOverADeviceAFifoOrADirectory) {
  const std::string dir = temp_dir("config-targets");
  Options options = clean(dir);
  const std::string refused_tail =
      ", not a config file; acc-config writes a config only over a regular file or at a new path, and leaves this "
      "one alone: choose another path with --config_file";
  std::vector<std::pair<std::string, std::string>> targets;  // path, what the message calls it
  targets.push_back({make_fifo(dir + "/fifo.yaml"), "a named pipe (FIFO)"});
  ASSERT_EQ(symlink((dir + "/fifo.yaml").c_str(), (dir + "/link.yaml").c_str()), 0);
  targets.push_back({dir + "/link.yaml", "a symbolic link to a named pipe (FIFO)"});
  if (geteuid() == 0) {  // a character device like /dev/null, in the test's directory
    ASSERT_EQ(mknod((dir + "/null.yaml").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    targets.push_back({dir + "/null.yaml", "a character device"});
  }
  for (const auto& [path, kind] : targets) {
    const Node before = node_of(path);
    const std::string line = "acc-config: error: '" + path + "' is " + kind + refused_tail;
    expect_refused(timed_run({ACC_CONFIG, "default", "--force", "--config_file", path}, options), line);
    // Without --force it is named too, never called "a config".
    expect_refused(timed_run({ACC_CONFIG, "default", "--config_file", path}, options), line);
    // The questionnaire refuses it before asking anything.
    options.stdin_text = "y\n1\nMULTI_CPU\n2\nno\n";  // yes to replacing it, then the answers
    expect_refused(timed_run({ACC_CONFIG, "--config_file", path}, options), line);
    options.stdin_text.clear();
    EXPECT_TRUE(node_of(path) == before) << path << " was replaced";
  }
  // A directory (and a link to one) is named as one, with the file name to give instead.
  const std::string folder = dir + "/folder";
  std::filesystem::create_directories(folder);
  ASSERT_EQ(symlink(folder.c_str(), (dir + "/to-folder").c_str()), 0);
  for (const auto& [path, kind] : {std::pair<std::string, std::string>{folder, "a directory"},
                                   {dir + "/to-folder", "a symbolic link to a directory"}}) {
    const Node before = node_of(path);
    const std::string line = "acc-config: error: '" + path + "' is " + kind +
                             "; name the config file itself with --config_file (for example " + path +
                             "/default_config.yaml)";
    expect_refused(timed_run({ACC_CONFIG, "default", "--config_file", path}, options), line);
    expect_refused(timed_run({ACC_CONFIG, "default", "--force", "--config_file", path}, options), line);
    EXPECT_TRUE(node_of(path) == before);
  }
  EXPECT_TRUE(std::filesystem::is_empty(folder));
  // The same through ACC_CONFIG_FILE, where acc-config writes by default.
  options.env["ACC_CONFIG_FILE"] = dir + "/fifo.yaml";
  expect_refused(timed_run({ACC_CONFIG, "default", "--force"}, options),
                 "acc-config: error: '" + dir + "/fifo.yaml' is a named pipe (FIFO)" + refused_tail);
  EXPECT_TRUE(S_ISFIFO(node_of(dir + "/fifo.yaml").mode));
}

// A "billion laughs": nine levels of nine aliases each. Before, one of 396 bytes took 3-5 s and each level
// nine times more; the aliases are now counted from the parser's events and the file refused at once.
std::string alias_bomb(int levels) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= levels; ++level) {
    const std::string previous = "*a" + std::to_string(level - 1);
    text += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 9; ++i) text += (i ? ", " : "") + previous;
    text += "]\n";
  }
  return text + "distributed_type: 'NO'\n";
}

TEST(BadInput, AYamlAliasBombIsRefusedWellUnderASecond) {
  const std::string dir = temp_dir("alias-bomb");
  Options options = clean(dir);
  options.timeout_s = 1;
  const std::string bomb = dir + "/bomb.yaml";
  std::ofstream(bomb) << alias_bomb(9);
  const std::string pids = dir + "/pids";
  std::filesystem::create_directories(pids);
  const Timed launched = timed_run({ACC_LAUNCH, "--config_file", bomb, FAKE_RANK, "pidfile", pids}, options);
  EXPECT_FALSE(launched.finished.timed_out);
  EXPECT_LT(launched.seconds, 1.0);
  EXPECT_EQ(launched.finished.exit_code, 2);
  EXPECT_THAT(launched.finished.err,
              HasSubstr("acc-launch: error: " + bomb + ":4:"));  // the first alias that passes the budget
  EXPECT_THAT(launched.finished.err,
              HasSubstr(" stand for more than 1000 values, far more than any config has (a YAML \"billion laughs\"); "
                        "write the values out instead of aliasing them"));
  EXPECT_TRUE(std::filesystem::is_empty(pids));

  const Timed env = timed_run({ACC_ENV, "--config_file", bomb}, options);
  EXPECT_FALSE(env.finished.timed_out);
  EXPECT_LT(env.seconds, 1.0);
  EXPECT_THAT(env.finished.out, HasSubstr("INVALID: " + bomb + ":4:"));
}

}  // namespace
}  // namespace acc::launcher::testing
