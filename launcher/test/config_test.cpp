// Config files: Accelerate's schema read from YAML and JSON, error messages, writing, default locations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "config_file.h"
#include "errors.h"
#include "test_process.h"
#include "yaml_aliases.h"

namespace acc::launcher {
namespace {

using ::testing::HasSubstr;

class ConfigFileTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string error_of(const std::string& name, const std::string& text) {
    try {
      read_config_file(write(name, text));
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  }
  // A YAML config whose line 2 is `key: value`: the error read_config_file gives, and the one
  // expected for it (file:2:column of the value, the key, the value as shown, then `allowed`).
  std::string error_of_line2(const std::string& key, const std::string& value) {
    return error_of(key + ".yaml", "distributed_type: NO\n" + key + ": " + value + "\n");
  }
  std::string bad_value_on_line2(const std::string& key, const std::string& shown, const std::string& allowed) {
    return dir_ + "/" + key + ".yaml:2:" + std::to_string(key.size() + 3) + ": " + key + ": bad value '" + shown +
           "'" + allowed;
  }
  struct BadValue {
    std::string key, value, allowed;
  };
  static std::string error_of_path(const std::string& path) {
    try {
      read_config_file(path);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no error";
  }
  std::string dir_ = testing::temp_dir("config");
};

TEST_F(ConfigFileTest, ReadsAccelerateYaml) {
  const ConfigFile config = read_config_file(write("a.yaml", R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
dynamo_config:
  dynamo_backend: INDUCTOR
enable_cpu_affinity: false
fsdp_config:
  fsdp_sharding_strategy: SHARD_GRAD_OP
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_offload_params: false
  backward_prefetch: backward_pre
gpu_ids: all
machine_rank: 0
main_process_ip: null
main_process_port: 29600
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)"));
  const LaunchSettings& s = config.settings;
  EXPECT_EQ(s.distributed_type, DistributedType::kFsdp);
  EXPECT_EQ(s.mixed_precision, "bf16");
  EXPECT_EQ(s.num_processes, 4);
  EXPECT_EQ(s.main_process_port, 29600);
  EXPECT_FALSE(s.main_process_ip.has_value());  // null means unset
  EXPECT_EQ(s.gpu_ids, "all");
  EXPECT_EQ(s.fsdp.at("fsdp_sharding_strategy"), "SHARD_GRAD_OP");
  EXPECT_EQ(s.fsdp.at("fsdp_offload_params"), "false");
  EXPECT_EQ(s.fsdp.at("fsdp_backward_prefetch"), "BACKWARD_PRE");  // prefix added, case normalized
  EXPECT_THAT(config.ignored_keys, ::testing::ElementsAre("dynamo_config"));
}

TEST_F(ConfigFileTest, ReadsJsonByExtensionAndJsonInYamlFiles) {
  // `accelerate config default` writes JSON text into default_config.yaml.
  const std::string json = R"({"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_CPU",
                               "num_processes": 2, "use_cpu": true, "mixed_precision": "no"})";
  for (const char* name : {"c.json", "default_config.yaml"}) {
    const LaunchSettings s = read_config_file(write(name, json)).settings;
    EXPECT_EQ(s.distributed_type, DistributedType::kMultiCpu) << name;
    EXPECT_EQ(s.num_processes, 2) << name;
    EXPECT_EQ(s.use_cpu, true) << name;
  }
}

TEST_F(ConfigFileTest, LegacyNumericShardingStrategyAndFp16) {
  const LaunchSettings s = read_config_file(write("old.yaml", "distributed_type: FSDP\nfp16: true\n"
                                                              "fsdp_config:\n  fsdp_sharding_strategy: 2\n"))
                               .settings;
  EXPECT_EQ(s.fsdp.at("fsdp_sharding_strategy"), "SHARD_GRAD_OP");
  EXPECT_EQ(s.mixed_precision, "fp16");
}

// Each key that set something keeps its line, for messages about settings the ranks would refuse; an
// fsdp_config key by its option's full name, whichever spelling the file used.
TEST_F(ConfigFileTest, RecordsTheLineOfEachKey) {
  const ConfigFile config = read_config_file(write("lines.yaml", "distributed_type: FSDP\nmixed_precision: fp8\n"
                                                                 "fsdp_config:\n  auto_wrap_policy: NO_WRAP\n"
                                                                 "  fsdp_version: 2\ngpu_ids: null\n"));
  EXPECT_EQ(config.lines, (std::map<std::string, int>{{"distributed_type", 1},
                                                      {"mixed_precision", 2},
                                                      {"fsdp_auto_wrap_policy", 4},
                                                      {"fsdp_version", 5}}));
  // JSON read with positions has them too.
  const ConfigFile json = read_config_file(write("lines.json", "{\"distributed_type\": \"NO\",\n\"mixed_precision\": \"fp8\"}"));
  EXPECT_EQ(json.lines.at("mixed_precision"), 2);
}

TEST_F(ConfigFileTest, UnknownKeyNamesPositionAndClosestKey) {
  EXPECT_EQ(error_of("u.yaml", "distributed_type: NO\nnum_proceses: 2\n"),
            dir_ + "/u.yaml:2:1: unknown key 'num_proceses' (did you mean 'num_processes'?); remove it or fix its spelling");
  EXPECT_THAT(error_of("f.yaml", "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_stratgy: FULL_SHARD\n"),
              HasSubstr("f.yaml:3:3: unknown key 'fsdp_sharding_stratgy' in fsdp_config (did you mean "
                        "'fsdp_sharding_strategy'?)"));
  EXPECT_THAT(error_of("j.json", R"({"distributed_type": "NO", "bogus_setting": 1})"),
              HasSubstr("j.json:1:28: unknown key 'bogus_setting'"));
}

TEST_F(ConfigFileTest, BadValuesListAllowedValues) {
  EXPECT_EQ(error_of("m.yaml", "distributed_type: NO\nmixed_precision: fp17\n"),
            dir_ + "/m.yaml:2:18: mixed_precision: bad value 'fp17'; allowed values: no, fp16, bf16, fp8 (did you mean 'fp16'?)");
  EXPECT_THAT(error_of("d.yaml", "distributed_type: DEEPSPEED\n"),
              HasSubstr("d.yaml:1:19: distributed_type: distributed type 'DEEPSPEED' is not supported by acc; use one of "
                        "NO, MULTI_CPU, MULTI_GPU, FSDP"));
  EXPECT_THAT(error_of("n.yaml", "distributed_type: NO\nnum_processes: two\n"),
              HasSubstr("n.yaml:2:16: num_processes: bad value 'two'; expected an integer >= 1, or -1"));
  EXPECT_THAT(error_of("b.yaml", "distributed_type: NO\nuse_cpu: maybe\n"),
              HasSubstr("use_cpu: bad value 'maybe'; allowed values: true, false"));
  EXPECT_THAT(error_of("s.yaml", "distributed_type: FSDP\nfsdp_config:\n  fsdp_state_dict_type: FULL\n"),
              HasSubstr("allowed values: FULL_STATE_DICT, LOCAL_STATE_DICT, SHARDED_STATE_DICT"));
  EXPECT_THAT(error_of("l.yaml", "distributed_type: NO\nnum_machines: [1, 2]\n"),
              HasSubstr("l.yaml:2:15: num_machines: expected a single value, found a list"));
  EXPECT_THAT(error_of("e.yaml", "num_processes: 2\n"), HasSubstr("no distributed_type; add `distributed_type: NO`"));
  EXPECT_THAT(error_of("sm.yaml", "compute_environment: AMAZON_SAGEMAKER\ndistributed_type: NO\n"),
              HasSubstr("allowed values: LOCAL_MACHINE"));
}

TEST_F(ConfigFileTest, IntegerKeysNameFileLineAndTheAllowedValues) {
  // The flags' ranges, checked where the file and line are known (issue 19: num_processes: 0 and
  // main_process_port: 70000 used to be reported later as the flags --num_processes/--main_process_port).
  const std::string processes = "; expected an integer >= 1, or -1 (give it on the command line)";
  const std::string port = "; expected a port 0-65535 (0 = a free port)";
  for (const auto& [key, value, allowed] : std::vector<BadValue>{
           {"num_processes", "0", processes},
           {"num_processes", "-3", processes},
           {"num_processes", "2.5", processes},
           {"num_processes", "99999999999", processes + " (at most 1000000000)"},
           {"num_machines", "0", "; expected an integer >= 1"},
           {"machine_rank", "-1", "; expected an integer >= 0"},
           {"main_process_port", "70000", port},
           {"main_process_port", "-1", port}}) {
    EXPECT_EQ(error_of_line2(key, value), bad_value_on_line2(key, value, allowed));
  }
  EXPECT_EQ(error_of("fm.yaml", "distributed_type: FSDP\nfsdp_config:\n  fsdp_min_num_params: -5\n"),
            dir_ + "/fm.yaml:3:24: fsdp_min_num_params: bad value '-5'; expected an integer >= 0");
  // A value spread over lines is shown on one line.
  EXPECT_EQ(error_of("ml.yaml", "distributed_type: NO\nnum_machines: |\n  2\n  3\n"),
            dir_ + "/ml.yaml:2:15: num_machines: bad value '2\\n3\\n'; expected an integer >= 1");
  // What stays allowed: -1 (ask on the command line), port 0 (a free one), the limits themselves.
  const LaunchSettings s = read_config_file(write("ok.yaml",
                                                  "distributed_type: NO\nnum_processes: -1\n"
                                                  "main_process_port: 0\nmachine_rank: 0\n"))
                               .settings;
  EXPECT_EQ(s.num_processes, -1);
  EXPECT_EQ(s.main_process_port, 0);
  EXPECT_EQ(read_config_file(write("max.yaml", "distributed_type: NO\nmain_process_port: 65535\n"))
                .settings.main_process_port,
            65535);
}

TEST_F(ConfigFileTest, RepeatedKeysAreAnErrorNamingBothLines) {
  // Issue 19: yaml-cpp (like PyYAML and json.load) quietly kept one of the values.
  const std::string fix = "; keep only one of them";
  EXPECT_EQ(error_of("d.yaml", "distributed_type: NO\nnum_processes: 2\nmixed_precision: 'no'\nnum_processes: 3\n"),
            dir_ + "/d.yaml:4:1: duplicate key 'num_processes', first set on line 2" + fix);
  EXPECT_EQ(
      error_of("f.yaml",
               "distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: true\n  fsdp_offload_params: false\n"),
      dir_ + "/f.yaml:4:3: duplicate key 'fsdp_offload_params', first set on line 3" + fix);
  // Also in the sections acc ignores, and when the fsdp_ prefix is left out on one of them.
  EXPECT_EQ(error_of("i.yaml", "distributed_type: NO\ndeepspeed_config:\n  zero_stage: 2\n  zero_stage: 3\n"),
            dir_ + "/i.yaml:4:3: duplicate key 'zero_stage', first set on line 3" + fix);
  EXPECT_EQ(error_of("p.yaml",
                     "distributed_type: FSDP\nfsdp_config:\n  backward_prefetch: BACKWARD_PRE\n"
                     "  fsdp_backward_prefetch: BACKWARD_POST\n"),
            dir_ +
                "/p.yaml:4:3: duplicate key 'fsdp_backward_prefetch' in fsdp_config: 'backward_prefetch' on line 3 "
                "sets the same option" +
                fix);
  // JSON the same way, with lines.
  EXPECT_EQ(
      error_of("d.json", "{\n  \"distributed_type\": \"NO\",\n  \"num_processes\": 2,\n  \"num_processes\": 3\n}\n"),
      dir_ + "/d.json:4:3: duplicate key 'num_processes', first set on line 3" + fix);
  // JSON that yaml-cpp cannot read (a UTF-16 surrogate pair) is read without positions; a repeated key is
  // still found.
  const std::string emoji =
      R"({"distributed_type": "NO", "main_training_function": "\ud83d\ude00", "num_processes": 2)";
  EXPECT_EQ(read_config_file(write("e.json", emoji + "}")).settings.num_processes, 2);
  EXPECT_EQ(error_of("e2.json", emoji + R"(, "num_processes": 3})"),
            dir_ + "/e2.json: duplicate key 'num_processes' in a JSON object" + fix);
}

TEST_F(ConfigFileTest, KeysMustBeNames) {
  // yaml-cpp reads `? [a, b]` as a key; this used to end acc-launch with an uncaught exception.
  EXPECT_EQ(error_of("k.yaml", "distributed_type: NO\n? [a, b]\n: 1\n"),
            dir_ + "/k.yaml:2:3: expected a key name, found a list; write `name: value`");
  EXPECT_EQ(error_of("n.yaml", "distributed_type: NO\n~: 1\n"),
            dir_ + "/n.yaml:2:1: expected a key name, found nothing; write `name: value`");
}

TEST_F(ConfigFileTest, JsonErrorsNameTheLine) {
  EXPECT_EQ(error_of("p.json", "{\"distributed_type\": \"NO\",\n \"main_process_port\": 70000}"),
            dir_ + "/p.json:2:23: main_process_port: bad value '70000'; expected a port 0-65535 (0 = a free port)");
}

TEST_F(ConfigFileTest, MainProcessIpIsChecked) {
  // Issue 19: any text was passed on to the ranks as MASTER_ADDR.
  const std::string allowed =
      "; expected an IPv4 address (10.0.0.1), an IPv6 address (fd00::1) or a host name (node-0.example.com)";
  for (const auto& [value, shown] : std::vector<std::pair<std::string, std::string>>{
           {"999.1.1.1", "999.1.1.1"}, {"1.2.3.4.5", "1.2.3.4.5"}, {"''", ""}}) {
    EXPECT_EQ(error_of_line2("main_process_ip", value), bad_value_on_line2("main_process_ip", shown, allowed));
  }
  EXPECT_EQ(error_of("d.json", "{\"distributed_type\": \"NO\",\n \"main_process_ip\": \"a b\"}"),
            dir_ + "/d.json:2:21: main_process_ip: bad value 'a b'" + allowed);
  for (const std::string good : {"10.0.0.1", "'fd00::1'", "node-0.cluster"})
    EXPECT_TRUE(read_config_file(write("ok.yaml", "distributed_type: NO\nmain_process_ip: " + good + "\n"))
                    .settings.main_process_ip.has_value());
}

TEST_F(ConfigFileTest, MalformedFilesGiveLineAndColumn) {
  EXPECT_THAT(error_of("bad.yaml", "distributed_type: NO\nnum_processes: [2\n"),
              ::testing::MatchesRegex(".*bad.yaml:[0-9]+:[0-9]+: malformed YAML: .+"));
  EXPECT_THAT(error_of("bad.json", "{\n  \"distributed_type\": \"NO\",\n  oops\n}"),
              ::testing::MatchesRegex(".*bad.json:3:3: malformed JSON: .+"));
  EXPECT_THAT(error_of("empty.yaml", ""), HasSubstr("the config file is empty; write one with `acc-config`"));
  EXPECT_THAT(error_of("list.yaml", "- a\n- b\n"), HasSubstr("list.yaml:1:1: expected a mapping"));
}

TEST_F(ConfigFileTest, OnlyRegularFilesUpToOneMebibyteAreRead) {
  // Issue 19: a directory was reported as "empty". (A FIFO and /dev/zero, which blocked, are tested on
  // acc-launch under a timeout in launch_process_test.)
  const std::string fix = "; give --config_file the path of a YAML or JSON config (`acc-config` writes one)";
  std::filesystem::create_directories(dir_ + "/sub.yaml");
  EXPECT_EQ(error_of_path(dir_ + "/sub.yaml"),
            "config file '" + dir_ + "/sub.yaml' is a directory, not a regular file" + fix);
  EXPECT_EQ(error_of_path("/dev/null"), "config file '/dev/null' is a character device, not a regular file" + fix);
  // A large file is refused from its size, before anything is read (this one is sparse).
  const std::string big = write("big.yaml", "distributed_type: NO\n");
  std::filesystem::resize_file(big, 64 << 20);
  EXPECT_EQ(error_of_path(big), "config file '" + big + "' is 67108864 bytes, over the 1 MiB limit for configs" + fix);
  // Up to the limit (1 MiB, the documented one) is fine, one byte more is not.
  const size_t limit = 1 << 20;
  std::string text = "distributed_type: NO\n#";
  text += std::string(limit - text.size() - 1, 'x') + "\n";
  ASSERT_EQ(text.size(), limit);
  EXPECT_EQ(read_config_file(write("limit.yaml", text)).settings.distributed_type, DistributedType::kNo);
  EXPECT_THAT(error_of("over.yaml", text + "\n"),
              HasSubstr("over.yaml' is 1048577 bytes, over the 1 MiB limit for configs"));
  // A symbolic link to a config is read as the config.
  std::filesystem::create_symlink(dir_ + "/limit.yaml", dir_ + "/link.yaml");
  EXPECT_EQ(read_config_file(dir_ + "/link.yaml").settings.distributed_type, DistributedType::kNo);
}

// PyYAML (Accelerate's reader) accepts aliases, so a config that uses a few is read as before; only what
// they stand for is bounded (yaml_aliases.h): a file whose aliases add more than kMaxAliasValues values
// is refused at the alias that passes the budget, with its line and column.
TEST_F(ConfigFileTest, AliasesAreReadWithinABudget) {
  const ConfigFile config = read_config_file(write("aliases.yaml", "distributed_type: MULTI_CPU\ndebug: &yes true\n"
                                                                   "use_cpu: *yes\nnum_processes: &n 2\n"));
  EXPECT_EQ(config.settings.debug, true);
  EXPECT_EQ(config.settings.use_cpu, true);
  EXPECT_EQ(config.settings.num_processes, 2);

  // One list of kMaxAliasValues values, aliased once: exactly the budget, accepted (then refused for
  // being an unknown key, which shows it was read); aliased twice: refused at the second alias.
  std::string list = "[";
  for (long i = 0; i < kMaxAliasValues - 1; ++i) list += "x, ";  // the list itself counts as one value
  list += "]";
  EXPECT_THAT(error_of("at-budget.yaml", "distributed_type: NO\nbig: &big " + list + "\nsame: *big\n"),
              HasSubstr("at-budget.yaml:2:1: unknown key 'big'"));
  EXPECT_EQ(error_of("over-budget.yaml", "distributed_type: NO\nbig: &big " + list + "\nsame: *big\nagain: *big\n"),
            dir_ + "/over-budget.yaml:4:8: the aliases of this file (here *big) stand for more than " +
                std::to_string(kMaxAliasValues) +
                " values, far more than any config has (a YAML \"billion laughs\"); write the values out instead of "
                "aliasing them (Accelerate's own configs use no aliases)");
}

TEST_F(ConfigFileTest, MissingFileNamesTheFlag) {
  try {
    read_config_file(dir_ + "/absent.yaml");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot read config file"));
    EXPECT_THAT(e.what(), HasSubstr("--config_file"));
  }
}

TEST_F(ConfigFileTest, WriteThenReadRoundTrips) {
  LaunchSettings s;
  s.distributed_type = DistributedType::kFsdp;
  s.mixed_precision = "bf16";
  s.num_processes = 8;
  s.num_machines = 2;
  s.machine_rank = 1;
  s.main_process_ip = "10.0.0.1";
  s.main_process_port = 29555;
  s.use_cpu = false;
  s.fsdp["fsdp_sharding_strategy"] = "FULL_SHARD";
  s.fsdp["fsdp_offload_params"] = "true";
  s.fsdp["fsdp_min_num_params"] = "1000";
  const std::string path = dir_ + "/nested/dir/out.yaml";
  write_config_file(path, s);
  const LaunchSettings back = read_config_file(path).settings;
  EXPECT_EQ(back.distributed_type, s.distributed_type);
  EXPECT_EQ(back.mixed_precision, s.mixed_precision);
  EXPECT_EQ(back.num_processes, 8);
  EXPECT_EQ(back.num_machines, 2);
  EXPECT_EQ(back.machine_rank, 1);
  EXPECT_EQ(back.main_process_ip, "10.0.0.1");
  EXPECT_EQ(back.main_process_port, 29555);
  EXPECT_EQ(back.fsdp, s.fsdp);
  EXPECT_THAT(testing::read_text(path), HasSubstr("fsdp_offload_params: true"));  // a YAML bool, not "true"
}

TEST_F(ConfigFileTest, DefaultLocations) {
  setenv("HOME", "/home/u", 1);
  unsetenv("XDG_CACHE_HOME");
  unsetenv("HF_HOME");
  unsetenv("ACC_CONFIG_FILE");
  EXPECT_EQ(acc_default_config_path(), "/home/u/.cache/acc/default_config.yaml");
  EXPECT_EQ(accelerate_default_config_path(), "/home/u/.cache/huggingface/accelerate/default_config.yaml");
  setenv("XDG_CACHE_HOME", "/x", 1);
  EXPECT_EQ(acc_default_config_path(), "/x/acc/default_config.yaml");
  EXPECT_EQ(accelerate_default_config_path(), "/x/huggingface/accelerate/default_config.yaml");
  setenv("HF_HOME", "/hf", 1);
  setenv("ACC_CONFIG_FILE", "/c.yaml", 1);
  EXPECT_EQ(acc_default_config_path(), "/c.yaml");
  EXPECT_EQ(accelerate_default_config_path(), "/hf/accelerate/default_config.yaml");

  // acc's file first, then Accelerate's, else none.
  setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  unsetenv("HF_HOME");
  unsetenv("ACC_CONFIG_FILE");
  EXPECT_EQ(find_default_config(), std::nullopt);
  LaunchSettings s;
  write_config_file(accelerate_default_config_path(), s);
  EXPECT_EQ(find_default_config(), accelerate_default_config_path());
  write_config_file(acc_default_config_path(), s);
  EXPECT_EQ(find_default_config(), acc_default_config_path());
  unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace acc::launcher

namespace acc::launcher {
namespace {

TEST(ExampleConfigs, AllParse) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(ACC_CONFIGS_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    const ConfigFile config = read_config_file(entry.path().string());
    EXPECT_TRUE(config.ignored_keys.empty()) << entry.path();
    ++count;
  }
  EXPECT_GE(count, 4);
}

}  // namespace
}  // namespace acc::launcher
