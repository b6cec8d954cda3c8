// acc-config: writes the default launch config, by questionnaire or with `acc-config default`.
#include <filesystem>
#include <iostream>

#include "cli_style.h"
#include "config_file.h"
#include "errors.h"
#include "launch_command.h"
#include "questionnaire.h"
#include "rank_environment.h"
#include "system_info.h"

using namespace acc::launcher;

int main(int argc, char** argv) {
  CLI::App app("Write the config acc-launch uses by default (Accelerate's format). Without a subcommand, asks "
               "questions; `acc-config default` writes a basic config without asking.",
               "acc-config");
  style_app(app, version_text("acc-config"), "[default]",
            "The config is written to --config_file, else $ACC_CONFIG_FILE, else "
            "${XDG_CACHE_HOME:-~/.cache}/acc/default_config.yaml. Exit status: 0 when written (or, for `default`, "
            "when one already exists), 2 for bad flags, input that ended early, or a path that is a directory, a FIFO "
            "or a device (never written over).");
  std::string path;
  app.add_option(flag_names("--config_file"), path, "Where to write the config")->option_text("PATH");
  app.require_subcommand(0, 1);

  CLI::App* basic = app.add_subcommand("default", "Write a basic config: one process per GPU, or one CPU process");
  basic->formatter(app.get_formatter());
  std::string mixed_precision = "no";
  bool force = false;
  basic->add_option(flag_names("--config_file"), path, "Where to write the config")->option_text("PATH");
  basic->add_option(flag_names("--mixed_precision"), mixed_precision, "no, fp16 or bf16; default no")
      ->option_text("MODE");
  basic->add_flag(flag_names("--force"), force, "Replace an existing config");

  if (auto exit_now = parse_or_exit(app, argc, argv)) return *exit_now;
  const bool interactive = !basic->parsed();
  bool asking = false;  // a question may be on the console, unanswered
  try {
    if (path.empty()) path = acc_default_config_path();
    // Before anything is asked or probed: a directory, FIFO or device there is named, never replaced.
    check_config_target(path);
    const MachineFacts facts = probe_machine(current_environment());
    if (!interactive) {
      const std::string mode = parse_acc_mixed_precision(mixed_precision, "--mixed_precision");
      if (std::filesystem::exists(path) && !force) {
        std::cerr << "acc-config: a config already exists at " << path
                  << "; not overwriting it (pass --force to replace it, or run acc-config to answer questions)\n";
        return ExitCode::kOk;
      }
      write_config_file(path, basic_settings(facts, mode));
    } else {
      asking = true;
      std::cout << "acc-config writes " << path << "\n";
      if (std::filesystem::exists(path) &&
          !ask_yes_no(std::cin, std::cout, "A config already exists there. Replace it?", false)) {
        std::cout << "Kept the existing config.\n";
        return ExitCode::kOk;
      }
      write_config_file(path, ask_launch_settings(std::cin, std::cout, facts));
    }
    std::cout << "acc configuration saved at " << path << "\n";
    return ExitCode::kOk;
  } catch (const UsageError& e) {
    if (asking) std::cout << std::endl;  // end the unanswered question's line
    std::cerr << "acc-config: error: " << e.what() << "\n";
    return ExitCode::kUsage;
  } catch (const std::filesystem::filesystem_error& e) {
    std::cerr << "acc-config: error: cannot write " << path << ": " << e.code().message()
              << "; choose another place with --config_file\n";
    return ExitCode::kUsage;
  }
}
