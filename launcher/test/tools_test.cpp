// acc-config, acc-env and acc-test as users run them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "test_process.h"

namespace acc::launcher::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Options in_cache(const std::string& name) {
  Options options;
  options.timeout_s = 20;
  options.env["XDG_CACHE_HOME"] = temp_dir(name);
  options.env["ACC_CONFIG_FILE"] = std::nullopt;
  options.env["HF_HOME"] = std::nullopt;
  options.env["CUDA_VISIBLE_DEVICES"] = "";  // the same answers with or without GPUs
  return options;
}

std::string default_path(const Options& options) { return *options.env.at("XDG_CACHE_HOME") + "/acc/default_config.yaml"; }

TEST(AccConfig, DefaultWritesABasicConfigAndNeverOverwritesWithoutForce) {
  const Options options = in_cache("config-default");
  const std::string path = default_path(options);
  Finished f = run({ACC_CONFIG, "default", "--mixed_precision", "bf16"}, options);
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(f.out, "acc configuration saved at " + path + "\n");
  const std::string written = read_text(path);
  EXPECT_THAT(written, HasSubstr("compute_environment: LOCAL_MACHINE"));
  EXPECT_THAT(written, HasSubstr("distributed_type: 'NO'"));
  EXPECT_THAT(written, HasSubstr("mixed_precision: bf16"));
  EXPECT_THAT(written, HasSubstr("num_processes: 1"));
  EXPECT_THAT(written, HasSubstr("use_cpu: true"));

  f = run({ACC_CONFIG, "default", "--mixed_precision", "fp16"}, options);
  EXPECT_EQ(f.exit_code, 0);
  EXPECT_THAT(f.err, HasSubstr("a config already exists at " + path + "; not overwriting it (pass --force"));
  EXPECT_EQ(read_text(path), written);

  f = run({ACC_CONFIG, "default", "--mixed-precision", "fp16", "--force"}, options);
  EXPECT_EQ(f.exit_code, 0);
  EXPECT_THAT(read_text(path), HasSubstr("mixed_precision: fp16"));

  f = run({ACC_CONFIG, "default", "--mixed_precision", "fp9", "--config_file", path + ".other"}, options);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("acc-config: error: --mixed_precision: bad value 'fp9'; allowed values: no, fp16, bf16 (did you mean 'fp16'?)\n"));

  // ACC_CONFIG_FILE moves the default, and acc-launch finds it there.
  Options moved = options;
  moved.env["ACC_CONFIG_FILE"] = *options.env.at("XDG_CACHE_HOME") + "/elsewhere.yaml";
  ASSERT_EQ(run({ACC_CONFIG, "default"}, moved).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(*moved.env["ACC_CONFIG_FILE"]));
  const Finished launched = run({ACC_LAUNCH, "--debug", FAKE_RANK}, moved);
  EXPECT_THAT(launched.err, HasSubstr("config file: " + *moved.env["ACC_CONFIG_FILE"]));
}

// acc-config writes a new file under a random name beside the config and renames it into place: a link
// planted at the old fixed temporary name (<config>.tmp) or at the config's own name is never written
// through, and the config keeps the mode any new file gets (0666 less the umask).
TEST(AccConfig, LinksPlantedAtItsNamesAreNeverWrittenThrough) {
  Options options = in_cache("config-links");
  const std::string dir = *options.env.at("XDG_CACHE_HOME");
  const std::string victim = dir + "/victim";
  std::ofstream(victim) << "the victim's own bytes\n";
  ASSERT_EQ(chmod(victim.c_str(), 0600), 0);
  auto expect_victim_untouched = [&] {
    struct stat info {};
    ASSERT_EQ(lstat(victim.c_str(), &info), 0);
    EXPECT_TRUE(S_ISREG(info.st_mode));
    EXPECT_EQ(info.st_mode & 07777, 0600u);
    EXPECT_EQ(read_text(victim), "the victim's own bytes\n");
  };
  auto expect_config = [](const std::string& path, const std::string& text, mode_t mode) {
    struct stat info {};
    ASSERT_EQ(lstat(path.c_str(), &info), 0) << path;
    EXPECT_TRUE(S_ISREG(info.st_mode)) << path << " is not a regular file";
    EXPECT_EQ(info.st_mode & 07777, mode) << path;
    EXPECT_THAT(read_text(path), HasSubstr(text));
  };
  const std::string shared = dir + "/shared";
  std::filesystem::create_directories(shared);
  const std::string config = shared + "/acc.yaml";
  ASSERT_EQ(symlink(victim.c_str(), (config + ".tmp").c_str()), 0);

  const mode_t umask_before = umask(027);
  Finished f = run({ACC_CONFIG, "default", "--config_file", config}, options);
  umask(umask_before);
  ASSERT_EQ(f.exit_code, 0) << f.err;
  expect_victim_untouched();
  expect_config(config, "compute_environment: LOCAL_MACHINE", 0640);

  // A link at the config's own name is replaced by the config (with --force, as any existing config).
  std::filesystem::remove(config);
  ASSERT_EQ(symlink(victim.c_str(), config.c_str()), 0);
  f = run({ACC_CONFIG, "default", "--force", "--mixed_precision", "bf16", "--config_file", config}, options);
  ASSERT_EQ(f.exit_code, 0) << f.err;
  expect_victim_untouched();
  expect_config(config, "mixed_precision: bf16", 0666 & ~umask_before);

  // The questionnaire writes the same way.
  const std::string asked = shared + "/asked.yaml";
  ASSERT_EQ(symlink(victim.c_str(), (asked + ".tmp").c_str()), 0);
  options.stdin_text = "1\nMULTI_CPU\n2\nfp16\n";  // machines, type, processes, precision
  f = run({ACC_CONFIG, "--config_file", asked}, options);
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  expect_victim_untouched();
  expect_config(asked, "num_processes: 2", 0666 & ~umask_before);

  // Nothing else is left in the directory: no temporaries.
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(shared)) names.push_back(entry.path().filename().string());
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("acc.yaml", "acc.yaml.tmp", "asked.yaml", "asked.yaml.tmp"));
}

// A config acc-config cannot write is named with the directory to fix, or the flag to choose another.
TEST(AccConfig, ADirectoryItCannotWriteToIsNamedWithTheFix) {
  const Options options = in_cache("config-unwritable");
  const std::string dir = *options.env.at("XDG_CACHE_HOME");
  const std::string readonly = dir + "/readonly";
  std::filesystem::create_directories(readonly);
  ASSERT_EQ(chmod(readonly.c_str(), 0555), 0);
  std::vector<std::string> argv{ACC_CONFIG, "default", "--config_file", readonly + "/acc.yaml"};
  if (geteuid() == 0) {
    // Root writes anywhere: the permission check needs another user.
    if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "running as root without /usr/bin/setpriv";
    argv.insert(argv.begin(), {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
  }
  Finished f = run(argv, options);
  if (f.exit_code != 2 && f.err.find("setpriv") != std::string::npos) GTEST_SKIP() << f.err;
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("acc-config: error: cannot create a file beside '" + readonly +
                               "/acc.yaml': Permission denied; the config was not written: check that you can write "
                               "to '" + readonly + "', or choose another place with --config_file\n"));
  EXPECT_TRUE(std::filesystem::is_empty(readonly));

  // A parent that is not a directory.
  std::ofstream(dir + "/a_file") << "x\n";
  f = run({ACC_CONFIG, "default", "--config_file", dir + "/a_file/acc.yaml"}, options);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("acc-config: error: cannot create the directory '" + dir + "/a_file' for the config " + dir +
                               "/a_file/acc.yaml: "));
  EXPECT_THAT(f.err, HasSubstr("; choose another place with --config_file\n"));

  // A directory where the config should be: named, with the file name it takes.
  f = run({ACC_CONFIG, "default", "--force", "--config_file", readonly}, options);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("acc-config: error: '" + readonly + "' is a directory; name the config file itself with "
                               "--config_file (for example " + readonly + "/default_config.yaml)\n"));
}

TEST(AccConfig, QuestionnaireFromPipedInputReasksBadAnswers) {
  const Options base = in_cache("config-questions");
  Options options = base;
  // machines, type (a bad answer first), cpu only, processes (bad then good), FSDP questions, precision.
  options.stdin_text = "1\nMULTI_TPU\nfsdp\nyes\nzero\n4\nshard_grad_op\nno\nNO_WRAP\nSHARDED_STATE_DICT\nno\nbf16\n";
  const Finished f = run({ACC_CONFIG}, options);
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_THAT(f.out, HasSubstr("How many machines will you use? [1]: "));
  EXPECT_THAT(f.out, HasSubstr("answer: bad value 'MULTI_TPU'; allowed values: NO, MULTI_CPU, MULTI_GPU, FSDP"));
  EXPECT_THAT(f.out, HasSubstr("answer: bad value 'zero'; expected an integer >= 1; please answer again"));
  const std::string written = read_text(default_path(options));
  EXPECT_THAT(written, HasSubstr("distributed_type: FSDP"));
  EXPECT_THAT(written, HasSubstr("num_processes: 4"));
  EXPECT_THAT(written, HasSubstr("fsdp_sharding_strategy: SHARD_GRAD_OP"));
  EXPECT_THAT(written, HasSubstr("fsdp_state_dict_type: SHARDED_STATE_DICT"));
  EXPECT_THAT(written, HasSubstr("mixed_precision: bf16"));
  EXPECT_THAT(written, HasSubstr("use_cpu: true"));

  // An existing config is only replaced when the user says so; input ending early writes nothing.
  options.stdin_text = "\n";
  Finished kept = run({ACC_CONFIG}, options);
  EXPECT_THAT(kept.out, HasSubstr("A config already exists there. Replace it? (yes/no) [no]: "));
  EXPECT_EQ(read_text(default_path(options)), written);
  options.stdin_text = "yes\n2\n";
  Finished cut = run({ACC_CONFIG}, options);
  EXPECT_EQ(cut.exit_code, 2);
  EXPECT_THAT(cut.err, HasSubstr("the input ended before the last question; nothing was written"));
  EXPECT_EQ(read_text(default_path(options)), written);
}

TEST(AccConfig, QuestionnaireReasksABadMainMachineAddress) {
  Options options = in_cache("config-address");
  // machines, this machine's rank, machine 0's address (bad, then good), then the defaults.
  options.stdin_text = "2\n0\n999.1.1.1\n10.0.0.1\n\n\n\n\n";
  const Finished f = run({ACC_CONFIG}, options);
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_THAT(f.out, HasSubstr("answer: bad value '999.1.1.1'; expected an IPv4 address (10.0.0.1), an IPv6 address "
                               "(fd00::1) or a host name (node-0.example.com); please answer again"));
  const std::string written = read_text(default_path(options));
  EXPECT_THAT(written, HasSubstr("main_process_ip: 10.0.0.1"));
  EXPECT_THAT(written, HasSubstr("main_process_port: 29500"));
}

TEST(AccConfig, QuestionnaireOnAPseudoTerminal) {
  // `script` gives acc-config a terminal, as a user at a shell has.
  Options options = in_cache("config-pty");
  const std::string path = default_path(options);
  options.stdin_text = "1\nMULTI_CPU\n2\nfp16\n";  // machines, type, processes, precision
  const Finished f = run({"/usr/bin/script", "-q", "-e", "-c", std::string(ACC_CONFIG), "/dev/null"}, options);
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_THAT(f.out, HasSubstr("Mixed precision? (no, fp16, bf16) [no]: "));
  EXPECT_THAT(f.out, HasSubstr("acc configuration saved at " + path));
  const std::string written = read_text(path);
  EXPECT_THAT(written, HasSubstr("distributed_type: MULTI_CPU"));
  EXPECT_THAT(written, HasSubstr("num_processes: 2"));
  EXPECT_THAT(written, HasSubstr("mixed_precision: fp16"));
}

TEST(AccEnv, PrintsVersionsPlatformHardwareAndConfig) {
  Options options = in_cache("env");
  for (const char* name : {"MASTER_ADDR", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) options.env[name] = std::nullopt;
  Finished f = run({ACC_ENV}, options);
  ASSERT_EQ(f.exit_code, 0);
  for (const char* line : {"- acc version: 0.1.0 (git ", "- Platform: Linux", "- Compiler (of the launcher): ",
                           "- CPU cores usable: ", "- RAM: ", "- libtorch: ", "- GPUs: ", "- acc-launch config: not found"})
    EXPECT_THAT(f.out, HasSubstr(line));
  ASSERT_EQ(run({ACC_CONFIG, "default"}, options).exit_code, 0);
  f = run({ACC_ENV}, options);
  EXPECT_THAT(f.out, HasSubstr("- acc-launch config: " + default_path(options) + "\n    compute_environment: LOCAL_MACHINE"));
  EXPECT_THAT(f.out, HasSubstr("- Network to the other machines (Gloo): one machine"));
  options.env["MASTER_ADDR"] = "127.0.0.1";
  EXPECT_THAT(run({ACC_ENV}, options).out,
              HasSubstr("- Network to the other machines (Gloo): lo (127.0.0.1): MASTER_ADDR 127.0.0.1 is this machine's loopback"));
  options.env["GLOO_SOCKET_IFNAME"] = "eth9";
  EXPECT_THAT(run({ACC_ENV}, options).out, HasSubstr("- Network to the other machines (Gloo): eth9 (no address here, GLOO_SOCKET_IFNAME)"));
  options.env["MASTER_ADDR"] = std::nullopt;
  options.env["GLOO_SOCKET_IFNAME"] = std::nullopt;
  EXPECT_THAT(run({ACC_ENV, "--help"}, options).out, HasSubstr("Usage: acc-env [options]"));
  EXPECT_THAT(run({ACC_ENV, "--version"}, options).out, HasSubstr("acc-env (acc) 0.1.0"));
  EXPECT_EQ(run({ACC_ENV, "--bogus"}, options).exit_code, 2);
}

TEST(AccEnv, ConfigThatIsNotARegularFileIsNamedNotRead) {
  // acc-env shows the config's contents: a FIFO or /dev/zero given as the config must not block it.
  Options options = in_cache("env-fifo");
  options.timeout_s = 5;
  const std::string fifo = *options.env["XDG_CACHE_HOME"] + "/fifo.yaml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [path, kind] : std::vector<std::pair<std::string, std::string>>{
           {fifo, "a named pipe (FIFO)"}, {"/dev/zero", "a character device"}}) {
    const Finished f = run({ACC_ENV, "--config_file", path}, options);
    EXPECT_FALSE(f.timed_out) << path;
    EXPECT_EQ(f.exit_code, 0) << path;
    EXPECT_THAT(f.out, HasSubstr("- acc-launch config: " + path + "\n    INVALID: config file '" + path + "' is " +
                                 kind + ", not a regular file"));
  }
}

TEST(AccTest, LaunchesTheSelfTestWithTheConfig) {
  Options options = in_cache("selftest");
  const std::string dir = *options.env["XDG_CACHE_HOME"];
  // Missing program: a clear error naming where it was expected. (The default location, next to
  // acc-test, holds the real acc-selftest when the runtime is built, so point elsewhere.)
  options.env["ACC_SELFTEST"] = dir + "/no-such-selftest";
  Finished f = run({ACC_TEST}, options);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("the self-test program was not found at " + dir + "/no-such-selftest"));
  options.env["ACC_SELFTEST"] = std::nullopt;

  // A passing self-test on two ranks.
  f = run({ACC_TEST, "-n", "2", "--main_process_port", "0", "--program", FAKE_RANK}, options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_THAT(f.out, HasSubstr("Test is a success!"));

  // A failing check on rank 1, found through ACC_SELFTEST.
  const std::string failing = dir + "/failing-selftest";
  std::ofstream(failing) << "#!/bin/sh\nif [ \"$RANK\" = 1 ]; then echo 'check split_between_processes: FAILED'; exit 1; fi\n";
  chmod(failing.c_str(), 0755);
  options.env["ACC_SELFTEST"] = failing;
  f = run({ACC_TEST, "-n", "2", "--main_process_port", "0"}, options);
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_THAT(f.err, HasSubstr("acc-test: failed: rank 1"));
  EXPECT_THAT(f.err, HasSubstr("  | check split_between_processes: FAILED"));
  EXPECT_THAT(f.out, Not(HasSubstr("success")));

  // Installed layout: acc-selftest next to acc-test.
  const std::string installed = dir + "/bin";
  std::filesystem::create_directories(installed);
  std::filesystem::copy_file(ACC_TEST, installed + "/acc-test");
  std::filesystem::copy_file(FAKE_RANK, installed + "/acc-selftest");
  options.env["ACC_SELFTEST"] = std::nullopt;
  f = run({installed + "/acc-test", "-q"}, options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_THAT(f.out, HasSubstr("Test is a success!"));
}

}  // namespace
}  // namespace acc::launcher::testing
