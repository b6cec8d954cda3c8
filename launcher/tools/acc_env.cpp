// acc-env: what a bug report needs to know about this machine and acc's setup.
#include <cstdio>
#include <iostream>
#include <sstream>

#include <acc_common/network_route.h>

#include "cli_style.h"
#include "config_file.h"
#include "errors.h"
#include "launch_command.h"
#include "launch_refusals.h"
#include "rank_environment.h"
#include "system_info.h"
#include "version.h"

using namespace acc::launcher;

namespace {

std::string gpu_lines() {
  // nvidia-smi can hang on a broken driver: bounded.
  const auto smi = capture_output(
      {"nvidia-smi", "--query-gpu=index,name,memory.total,driver_version", "--format=csv,noheader"}, 10);
  if (!smi) return "none found (no working nvidia-smi)";
  std::istringstream lines(*smi);
  std::string line, out;
  int count = 0;
  while (std::getline(lines, line))
    if (!line.empty()) {
      out += "\n    GPU " + line;
      ++count;
    }
  return count == 0 ? "none (nvidia-smi lists no GPU)" : std::to_string(count) + out;
}

// The config, and what acc-launch would say of it before starting a rank: where it is invalid, what the
// ranks would refuse (with the environment they would inherit, `env`), and what acc ignores.
std::string config_section(const std::string& explicit_path, const EnvMap& env) {
  std::optional<std::string> path;
  try {
    path = explicit_path.empty() ? find_default_config() : explicit_path;
  } catch (const UsageError& e) {
    return "INVALID: " + std::string(e.what());  // ACC_CONFIG_FILE names no config: acc-launch would stop
  }
  if (!path)
    return "not found (looked for " + acc_default_config_path() + " and " + accelerate_default_config_path() +
           "; write one with acc-config)";
  std::string out = *path;
  try {
    const ConfigFile config = read_config_file(*path);
    SettingSources sources;
    sources.config_path = *path;
    sources.config_lines = config.lines;
    for (const LaunchRefusal& refusal : launch_refusals(configured_variables(config.settings, env), sources))
      out += "\n    REFUSED: " + refusal.message +
             (refusal.every_program ? " (acc-launch refuses this for any program)"
                                    : " (acc-launch refuses this for acc programs, which refuse it at startup)");
    for (const std::string& note : ignored_fsdp_notes(config.settings, sources)) out += "\n    note: " + note;
  } catch (const UsageError& e) {
    out += "\n    INVALID: " + std::string(e.what());
  }
  // The contents through the same checks: a FIFO or a device is named above, never opened here.
  std::string text;
  try {
    text = read_config_text(*path);
  } catch (const UsageError&) {
    return out;
  }
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) out += "\n    " + line;
  return out;
}

// The network the ranks of this machine would use to reach the others, chosen as the runtime chooses
// it (acc_common/network_route.h), for MASTER_ADDR or else the config's main_process_ip.
std::string network_line(const EnvMap& env, const std::string& explicit_path) {
  auto value = [&env](const char* name) { return env.count(name) ? env.at(name) : std::string(); };
  std::string host = value("MASTER_ADDR");
  if (host.empty()) {
    try {
      const std::optional<std::string> path = explicit_path.empty() ? find_default_config() : explicit_path;
      if (path) host = read_config_file(*path).settings.main_process_ip.value_or("");
    } catch (const UsageError&) {
      // The config section says what is wrong with it.
    }
  }
  if (host.empty())
    return "one machine (neither MASTER_ADDR nor the config's main_process_ip names machine 0)";
  return acc::common::choose_gloo_network(host, value("GLOO_SOCKET_IFNAME"), value("NCCL_SOCKET_IFNAME")).description;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Print versions, platform, hardware and the launch config in effect, for a bug report.", "acc-env");
  style_app(app, version_text("acc-env"), "", "Exit status: 0, or 2 for a bad flag.");
  std::string config_file;
  app.add_option(flag_names("--config_file"), config_file, "Show this config instead of the default one")
      ->option_text("PATH");
  if (auto exit_now = parse_or_exit(app, argc, argv)) return *exit_now;

  const EnvMap env = current_environment();
  const auto torch = find_torch(env);
  char memory[32];
  std::snprintf(memory, sizeof(memory), "%.1f GiB", total_memory_gib());
  std::cout << "Copy and paste the text below into your bug report.\n\n"
            << "- acc version: " ACC_VERSION " (git " ACC_GIT_REVISION ")\n"
            << "- Platform: " << platform_description() << "\n"
            << "- Compiler (of the launcher): " << compiler_description() << "\n"
            << "- CPU cores usable: " << usable_cpu_count() << "\n"
            << "- RAM: " << memory << "\n";
  if (torch) {
    std::cout << "- libtorch: " << torch->version << " at " << torch->location << "\n"
              << "- CUDA (libtorch built with): " << (torch->cuda.empty() ? "none (CPU build)" : torch->cuda) << "\n"
              << "- NCCL: " << (torch->nccl.empty() ? "not found" : torch->nccl) << "\n"
              << "- cuDNN: " << (torch->cudnn.empty() ? "not found" : torch->cudnn) << "\n";
  } else {
    std::cout << "- libtorch: not found (set ACC_TORCH_DIR to a libtorch directory, or ACC_VENV to acc's venv)\n";
  }
  std::cout << "- GPUs: " << gpu_lines() << "\n"
            << "- CUDA_VISIBLE_DEVICES: " << (env.count("CUDA_VISIBLE_DEVICES") ? env.at("CUDA_VISIBLE_DEVICES") : "not set")
            << "\n"
            << "- Network to the other machines (Gloo): " << network_line(env, config_file) << "\n"
            << "- acc-launch config: " << config_section(config_file, env) << "\n";
  return ExitCode::kOk;
}
