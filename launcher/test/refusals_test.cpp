// What acc programs refuse at startup is refused by acc-launch before any rank starts, listed by acc-env,
// and never offered by acc-config. The configs are Accelerate's own templates, verbatim
// (accelerate_templates/: huggingface/accelerate examples/config_yaml_templates/fsdp.yaml at 1a6af0bd6dc1
// and fp8.yaml at 1d57b830a07f), and the files `accelerate config` writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_process.h"

namespace acc::launcher::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kFsdpTemplate = std::string(ACCELERATE_TEMPLATES) + "/fsdp.yaml";
const std::string kFp8Template = std::string(ACCELERATE_TEMPLATES) + "/fp8.yaml";

// No config from the machine and no FSDP_* of the caller's shell: the ranks see only what the test gives.
Options clean(const std::string& name) {
  Options options;
  options.timeout_s = 20;
  options.env["XDG_CACHE_HOME"] = temp_dir(name);
  options.env["HF_HOME"] = std::nullopt;
  options.env["ACC_CONFIG_FILE"] = std::nullopt;
  options.env["CUDA_VISIBLE_DEVICES"] = "";
  for (const char* name : {"FSDP_TRANSFORMER_CLS_TO_WRAP", "FSDP_AUTO_WRAP_POLICY", "SLURM_STEP_ID", "PET_NNODES"})
    options.env[name] = std::nullopt;
  return options;
}

// The line of `path` that sets `key`, counted here so that the test follows the file, not a number.
std::string line_of(const std::string& path, const std::string& key) {
  std::istringstream lines(read_text(path));
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const size_t start = line.find_first_not_of(' ');
    if (start != std::string::npos && line.compare(start, key.size() + 1, key + ":") == 0) return std::to_string(number);
  }
  ADD_FAILURE() << key << " not in " << path;
  return "?";
}

// acc-launch on `program`, whose every rank writes DIR/rank_R.pid as its first act: the files say which
// ranks started.
Finished launch(const std::vector<std::string>& flags, const std::string& program, const std::string& dir,
                const Options& options) {
  std::vector<std::string> argv{ACC_LAUNCH, "--main_process_port", "0"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {program, "pidfile", dir});
  return run(argv, options);
}

size_t ranks_started(const std::string& dir) {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) count += entry.path().extension() == ".pid";
  return count;
}

TEST(AccLaunchRefusals, AccelerateFsdpTemplateIsRefusedBeforeAnyRankStarts) {
  const Options options = clean("refuse-fsdp-template");
  const std::string dir = *options.env.at("XDG_CACHE_HOME");
  const std::string policy_line = line_of(kFsdpTemplate, "fsdp_auto_wrap_policy");

  // An acc program: one line naming the file's line, the key, why and the fix; exit 2; no rank started.
  Finished f = launch({"--config_file", kFsdpTemplate}, FAKE_ACC_RANK, dir, options);
  EXPECT_EQ(f.exit_code, 2) << f.err;
  EXPECT_EQ(f.err, "acc-launch: error: " + kFsdpTemplate + ":" + policy_line +
                       ": fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP needs the module types to wrap, and C++ "
                       "models do not declare them (Python takes them from the model's _no_split_modules); name "
                       "your layers' module types in fsdp_transformer_layer_cls_to_wrap (e.g. Block, which also "
                       "matches BlockImpl), or choose fsdp_auto_wrap_policy SIZE_BASED_WRAP or NO_WRAP (every rank "
                       "of an acc program refuses this at startup; none was started)\n");
  EXPECT_EQ(ranks_started(dir), 0u);

  // The fix it names works: class names given on the command line start both ranks, and the template's
  // fsdp_use_orig_params is named as ignored at its line, with what acc does instead.
  f = launch({"--config_file", kFsdpTemplate, "--fsdp_transformer_layer_cls_to_wrap", "Block"}, FAKE_ACC_RANK, dir,
             options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(ranks_started(dir), 2u);
  EXPECT_THAT(f.err, HasSubstr("acc-launch: note: " + kFsdpTemplate + ":" + line_of(kFsdpTemplate, "fsdp_use_orig_params") +
                               ": fsdp_use_orig_params: true is ignored: acc always keeps the model's own parameters, "
                               "as use_orig_params true does"));
  EXPECT_THAT(f.err, Not(HasSubstr("error")));

  // So do class names the ranks inherit from the launcher's environment, as the runtime reads them.
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  Options exported = options;
  exported.env["FSDP_TRANSFORMER_CLS_TO_WRAP"] = "Block";
  f = launch({"--config_file", kFsdpTemplate}, FAKE_ACC_RANK, dir, exported);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(ranks_started(dir), 2u);

  // A program that does not link libacc (a Python program through torch.distributed) may run with it:
  // it starts, with a note.
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  f = launch({"--config_file", kFsdpTemplate}, FAKE_RANK, dir, options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(ranks_started(dir), 2u);
  EXPECT_THAT(f.err, HasSubstr("acc-launch: note: " + kFsdpTemplate + ":" + policy_line +
                               ": fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP needs the module types to wrap"));
  EXPECT_THAT(f.err, HasSubstr("(acc programs refuse this at startup; " + std::string(FAKE_RANK) +
                               " does not link libacc, so it starts)"));
}

TEST(AccLaunchRefusals, Fp8IsRefusedForAccProgramsAtItsLineOrFlag) {
  const Options options = clean("refuse-fp8");
  const std::string dir = *options.env.at("XDG_CACHE_HOME");
  Finished f = launch({"--config_file", kFp8Template}, FAKE_ACC_RANK, dir, options);
  EXPECT_EQ(f.exit_code, 2) << f.err;
  EXPECT_THAT(f.err, HasSubstr("acc-launch: error: " + kFp8Template + ":" + line_of(kFp8Template, "mixed_precision") +
                               ": mixed_precision: fp8 training is not part of acc (Accelerate runs it through "
                               "Transformer Engine, MS-AMP or torchao, which acc does not have); use 'bf16' or "
                               "'fp16' (every rank of an acc program refuses this at startup; none was started)\n"));
  EXPECT_EQ(ranks_started(dir), 0u);

  f = launch({"--mixed_precision", "FP8"}, FAKE_ACC_RANK, dir, options);
  EXPECT_EQ(f.exit_code, 2) << f.err;
  EXPECT_THAT(f.err, HasSubstr("acc-launch: error: --mixed_precision: fp8 training is not part of acc"));
  EXPECT_EQ(ranks_started(dir), 0u);

  // The flag wins over the file, so the fix on the command line starts the rank.
  f = launch({"--config_file", kFp8Template, "--mixed_precision", "bf16"}, FAKE_ACC_RANK, dir, options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(ranks_started(dir), 1u);
}

// What `accelerate config` writes for fsdp_version 1 (accelerate/commands/config/cluster.py: the strategy
// goes into fsdp_reshard_after_forward, and fsdp_use_orig_params is asked), and fsdp_version 2.
TEST(AccLaunchRefusals, AccelerateConfigFsdpVersionsAreJudgedAsTheRanksWouldRunThem) {
  const Options options = clean("refuse-fsdp1");
  const std::string dir = *options.env.at("XDG_CACHE_HOME");
  const std::string fsdp1 = dir + "/fsdp1.yaml";
  std::ofstream(fsdp1) << "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n"
                          "  fsdp_auto_wrap_policy: NO_WRAP\n  fsdp_reshard_after_forward: SHARD_GRAD_OP\n"
                          "  fsdp_use_orig_params: false\n  fsdp_version: 1\nmixed_precision: 'no'\nnum_processes: 2\n";
  Finished f = launch({"--config_file", fsdp1}, FAKE_ACC_RANK, dir, options);
  EXPECT_EQ(f.exit_code, 2) << f.err;
  EXPECT_THAT(f.err, HasSubstr("acc-launch: error: " + fsdp1 + ":" + line_of(fsdp1, "fsdp_reshard_after_forward") +
                               ": fsdp_reshard_after_forward: 'SHARD_GRAD_OP' is a sharding strategy (FSDP1's spelling "
                               "of this setting), and acc reads fsdp_reshard_after_forward as a boolean"));
  EXPECT_THAT(f.err, HasSubstr("; give the strategy as fsdp_sharding_strategy SHARD_GRAD_OP, and set "
                               "fsdp_reshard_after_forward true (or remove it)"));
  EXPECT_EQ(ranks_started(dir), 0u);

  const std::string fsdp2 = dir + "/fsdp2.yaml";
  std::ofstream(fsdp2) << "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n"
                          "  fsdp_auto_wrap_policy: NO_WRAP\n  fsdp_reshard_after_forward: false\n"
                          "  fsdp_version: 2\nmixed_precision: 'no'\nnum_processes: 2\n";
  f = launch({"--config_file", fsdp2}, FAKE_ACC_RANK, dir, options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(ranks_started(dir), 2u);
  EXPECT_THAT(f.err, HasSubstr("acc-launch: note: " + fsdp2 + ":" + line_of(fsdp2, "fsdp_version") +
                               ": fsdp_version: 2 is ignored: acc has one FSDP, not torch's FSDP2"));
  // As flags too, named as the flags.
  f = launch({"--use_fsdp", "-n", "2", "--fsdp_version", "2", "--fsdp_use_orig_params", "false"}, FAKE_ACC_RANK, dir,
             options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_THAT(f.err, HasSubstr("acc-launch: note: --fsdp_version: 2 is ignored: acc has one FSDP"));
  EXPECT_THAT(f.err, HasSubstr("acc-launch: note: --fsdp_use_orig_params: false is ignored: acc always keeps"));
  // Without FSDP, fsdp_* are ignored as a whole (one note), not one by one.
  f = launch({"-n", "1", "--fsdp_version", "2"}, FAKE_ACC_RANK, dir, options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_THAT(f.err, Not(HasSubstr("fsdp_version: 2 is ignored")));
  EXPECT_THAT(f.err, HasSubstr("fsdp_* settings are ignored because distributed_type is NO"));
}

TEST(AccLaunchRefusals, WhatAccelerateLaunchRefusesTooIsRefusedForEveryProgram) {
  const Options options = clean("refuse-cpu-ram");
  const std::string dir = *options.env.at("XDG_CACHE_HOME");
  const std::string config = dir + "/cfg.yaml";
  std::ofstream(config) << "distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n"
                           "  fsdp_cpu_ram_efficient_loading: true\n  fsdp_sync_module_states: false\n";
  for (const char* program : {FAKE_RANK, FAKE_ACC_RANK}) {
    const Finished f = launch({"--config_file", config}, program, dir, options);
    EXPECT_EQ(f.exit_code, 2) << program << f.err;
    EXPECT_EQ(f.err, "acc-launch: error: " + config + ":" + line_of(config, "fsdp_cpu_ram_efficient_loading") +
                         ": fsdp_cpu_ram_efficient_loading: cpu_ram_efficient_loading needs sync_module_states (the "
                         "processes that build the model empty get the main process's weights through it); set "
                         "fsdp_sync_module_states true, or fsdp_cpu_ram_efficient_loading false (accelerate launch "
                         "refuses this too); nothing was started\n");
    EXPECT_EQ(ranks_started(dir), 0u) << program;
  }
}

TEST(AccEnvRefusals, ListsWhatTheRanksWouldRefuseAndWhatIsIgnored) {
  const Options options = clean("env-refusals");
  Finished f = run({ACC_ENV, "--config_file", kFsdpTemplate}, options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_THAT(f.out, HasSubstr("- acc-launch config: " + kFsdpTemplate + "\n    REFUSED: " + kFsdpTemplate + ":" +
                               line_of(kFsdpTemplate, "fsdp_auto_wrap_policy") +
                               ": fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP needs the module types to wrap"));
  EXPECT_THAT(f.out, HasSubstr("or NO_WRAP (acc-launch refuses this for acc programs, which refuse it at startup)\n"
                               "    note: " + kFsdpTemplate + ":" + line_of(kFsdpTemplate, "fsdp_use_orig_params") +
                               ": fsdp_use_orig_params: true is ignored: acc always keeps"));
  EXPECT_THAT(f.out, HasSubstr("\n    distributed_type: FSDP\n"));  // the contents still follow

  f = run({ACC_ENV, "--config_file", kFp8Template}, options);
  EXPECT_EQ(f.exit_code, 0) << f.err;
  EXPECT_THAT(f.out, HasSubstr("    REFUSED: " + kFp8Template + ":" + line_of(kFp8Template, "mixed_precision") +
                               ": mixed_precision: fp8 training is not part of acc"));

  // The ranks would inherit class names exported here: then nothing is refused.
  Options exported = options;
  exported.env["FSDP_TRANSFORMER_CLS_TO_WRAP"] = "Block";
  f = run({ACC_ENV, "--config_file", kFsdpTemplate}, exported);
  EXPECT_THAT(f.out, Not(HasSubstr("REFUSED")));
}

TEST(AccConfigRefusals, Fp8IsNotOfferedAndIsRefusedSayingWhy) {
  Options options = clean("config-fp8");
  const std::string path = *options.env.at("XDG_CACHE_HOME") + "/acc.yaml";
  options.stdin_text = "1\nMULTI_CPU\n2\nfp8\nbf16\n";  // machines, type, processes, precision (fp8, then bf16)
  Finished f = run({ACC_CONFIG, "--config_file", path}, options);
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_THAT(f.out, HasSubstr("Mixed precision? (no, fp16, bf16) [no]: "));
  EXPECT_THAT(f.out, HasSubstr("  answer: fp8 training is not part of acc (Accelerate runs it through Transformer "
                               "Engine, MS-AMP or torchao, which acc does not have); use 'bf16' or 'fp16'; please "
                               "answer again\n"));
  EXPECT_THAT(read_text(path), HasSubstr("mixed_precision: bf16"));

  f = run({ACC_CONFIG, "default", "--mixed_precision", "fp8", "--config_file", path + ".fp8"}, options);
  EXPECT_EQ(f.exit_code, 2);
  EXPECT_THAT(f.err, HasSubstr("acc-config: error: --mixed_precision: fp8 training is not part of acc"));
  EXPECT_FALSE(std::filesystem::exists(path + ".fp8"));
}

}  // namespace
}  // namespace acc::launcher::testing
