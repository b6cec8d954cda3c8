// acc-launch: starts a program on every rank of this machine (see docs/launcher.md).
#include <iostream>

#include "cli_style.h"
#include "errors.h"
#include "launch_command.h"

using namespace acc::launcher;

int main(int argc, char** argv) {
  CLI::App app("Start PROGRAM as every rank of a distributed run on this machine. Flags follow `accelerate "
               "launch`; flags override the config file, which overrides the defaults.",
               "acc-launch");
  LaunchInvocation invocation;
  style_app(app, version_text("acc-launch"), "PROGRAM [PROGRAM ARGS...]",
            "Every flag may also be spelled with dashes (--num-processes). Exit status: 0 when every rank "
            "succeeded; else the exit code of the first rank that failed (128+N if killed by signal N); 2 for a "
            "bad flag or config, a PROGRAM that is not a file (a directory, a FIFO, a device) or a --log_dir that "
            "cannot be a directory; 126/127 when PROGRAM cannot be executed/found; 128+N when acc-launch was "
            "stopped by signal N. See docs/launcher.md.");
  // Everything from the first positional argument on belongs to the program, not to acc-launch.
  app.prefix_command();
  add_launch_flags(app, invocation);
  if (auto exit_now = parse_or_exit(app, argc, argv)) return *exit_now;
  try {
    std::vector<std::string> rest = app.remaining();
    if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());  // "--" ends acc-launch's options
    else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') throw_unknown_flag(app, rest.front());
    if (rest.empty()) throw UsageError("no program given; usage: acc-launch [options] PROGRAM [ARGS...]");
    invocation.supervision.program = rest;
    check_flag_combinations(invocation);
    return run_launch(invocation);
  } catch (const UsageError& e) {
    std::cerr << "acc-launch: error: " << e.what() << "\n";
    return ExitCode::kUsage;
  }
}
