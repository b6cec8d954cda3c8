// acc-test: launches acc's self-test program (acc-selftest, built with the runtime) with the current
// config, the way `accelerate test` runs its bundled script.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <acc_common/path_kind.h>

#include "cli_style.h"
#include "errors.h"
#include "launch_command.h"

using namespace acc::launcher;

namespace {

// --program, else $ACC_SELFTEST, else acc-selftest next to this executable (where both are built and
// installed).
std::string find_selftest(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("ACC_SELFTEST"); env && *env) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / "acc-selftest").string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Check that distributed training works here: runs acc's self-test program on every rank with the "
               "config acc-launch would use (process state, main_process_first, split_between_processes, RNG "
               "sync, data-loader sharding, training equivalence, bf16, trigger).",
               "acc-test");
  LaunchInvocation invocation;
  invocation.supervision.tool_name = "acc-test";
  style_app(app, version_text("acc-test"), "",
            "Takes acc-launch's flags. Exit status: 0 when every check passed; otherwise acc-launch's status for the "
            "failed rank; 2 for bad flags or config, or a self-test program that is missing or not a file (a "
            "directory, a FIFO, a device).");
  std::string program;
  app.add_option(flag_names("--program"), program,
                 "Self-test program to launch; default $ACC_SELFTEST, else acc-selftest next to acc-test")
      ->option_text("PATH");
  add_launch_flags(app, invocation);
  if (auto exit_now = parse_or_exit(app, argc, argv)) return *exit_now;
  try {
    const std::string selftest = find_selftest(program);
    const std::string fix =
        "build it with the runtime (target acc-selftest), or name it with --program PATH or ACC_SELFTEST";
    // Looked at without opening it: a FIFO or a device named here must not block the launch.
    const acc::common::PathKind kind = acc::common::inspect_path(selftest);
    if (kind.exists() && !kind.regular())
      throw UsageError("the self-test program " + selftest + " is " + kind.description() + ", not a program; " + fix);
    if (!kind.exists()) throw UsageError("the self-test program was not found at " + selftest + "; " + fix);
    if (::access(selftest.c_str(), X_OK) != 0) {
      const std::string reason = std::strerror(errno);
      throw UsageError("the self-test program " + selftest + " cannot be executed (" + reason + "); " + fix);
    }
    invocation.supervision.program = {selftest};
    check_flag_combinations(invocation);
    const int code = run_launch(invocation);
    if (code == ExitCode::kOk) std::cout << "Test is a success! You are ready for your distributed training!\n";
    else std::cerr << "acc-test: the self-test failed (exit status " << code << "); the failing check is named above\n";
    return code;
  } catch (const UsageError& e) {
    std::cerr << "acc-test: error: " << e.what() << "\n";
    return ExitCode::kUsage;
  }
}
