#include "launch_command.h"

#include <unistd.h>

#include <iostream>

#include <acc/environment.h>

#include "cli_style.h"
#include "config_file.h"
#include "errors.h"
#include "fsdp_options.h"
#include "launch_plan.h"
#include "launch_refusals.h"
#include "ports.h"
#include "program_links_acc.h"
#include "program_path.h"
#include "rank_logs.h"
#include "rank_environment.h"
#include "system_info.h"
#include "version.h"

namespace acc::launcher {
namespace {

// Runs one of launch_settings.h's checks inside a CLI11 callback, so its message reaches the user as a
// CLI11 validation error.
template <typename F>
auto checked(F&& parse) {
  try {
    return parse();
  } catch (const UsageError& e) {
    throw CLI::ValidationError(e.what());
  }
}

// An integer flag checked by parse_int, so that a bad value gets one line naming the flag and the allowed
// values (CLI11's own range checks print the bounds as doubles, 309 digits for "positive"). `into` is an
// int or a std::optional<int>.
template <typename T>
CLI::Option* add_int_flag(CLI::App& app, const std::string& snake_name, const std::string& short_names,
                          const IntRange& range, T& into, const std::string& help) {
  return app
      .add_option_function<std::string>(
          flag_names(snake_name, short_names),
          [snake_name, range, &into](const std::string& v) {
            into = checked([&] { return parse_int(v, snake_name, range); });
          },
          help)
      ->option_text("N");
}

// The same for the flags given in seconds.
CLI::Option* add_seconds_flag(CLI::App& app, const std::string& snake_name, double min, double max,
                              const std::string& allowed, double& into, const std::string& help) {
  return app
      .add_option_function<std::string>(
          flag_names(snake_name),
          [snake_name, min, max, allowed, &into](const std::string& v) {
            into = checked([&] { return parse_number(v, snake_name, min, max, allowed); });
          },
          help)
      ->option_text("SECONDS");
}

void print_plan(const LaunchPlan& plan, const std::optional<std::string>& config, const SupervisorOptions& options) {
  std::cerr << options.tool_name << ": config file: " << config.value_or("none") << "\n"
            << options.tool_name << ": " << plan.world_size << " rank(s) over " << plan.num_machines
            << " machine(s); this is machine " << plan.machine_rank << " with ranks "
            << plan.machine_rank * plan.local_world_size << ".."
            << (plan.machine_rank + 1) * plan.local_world_size - 1 << "; rendezvous at " << plan.master_addr << ":"
            << plan.master_port << "\n"
            << options.tool_name << ": distributed_type " << to_string(plan.distributed_type) << ", mixed_precision "
            << plan.mixed_precision << ", use_cpu " << (plan.use_cpu ? "true" : "false") << "\n";
  for (const auto& [name, value] : plan.fsdp_env) std::cerr << options.tool_name << ":   " << name << "=" << value << "\n";
}

}  // namespace

std::string version_text(const std::string& tool) {
  return tool + " (acc) " ACC_VERSION " (git " ACC_GIT_REVISION ")";
}

void add_launch_flags(CLI::App& app, LaunchInvocation& into) {
  LaunchSettings& s = into.flags;
  SupervisorOptions& sup = into.supervision;

  app.add_option_function<std::string>(flag_names("--config_file"), [&](const std::string& v) { into.config_file = v; },
                                       "Config file (Accelerate's YAML, or JSON if the name ends in .json); default: "
                                       "acc's default config, else Accelerate's")
      ->option_text("PATH");
  app.add_flag(flag_names("--quiet", "-q"), sup.quiet, "Print only errors, not the launcher's notes");
  app.add_flag_callback(flag_names("--debug"), [&] { s.debug = true; },
                        "Print the launch plan and set ACCELERATE_DEBUG_MODE=true in the ranks");

  auto* hardware = "Hardware";
  app.add_flag_callback(flag_names("--cpu"), [&] { s.use_cpu = true; ++into.hardware_flags; },
                        "Run on CPU even if GPUs are present")
      ->group(hardware);
  app.add_flag_callback(flag_names("--multi_gpu"), [&] { s.distributed_type = DistributedType::kMultiGpu; ++into.hardware_flags; },
                        "Distributed GPU training (DDP)")
      ->group(hardware);
  app.add_flag_callback(flag_names("--use_fsdp"), [&] { s.distributed_type = DistributedType::kFsdp; ++into.hardware_flags; },
                        "Fully sharded data parallel training (see the FSDP flags)")
      ->group(hardware);
  app.add_option_function<std::string>(
         flag_names("--mixed_precision"),
         [&](const std::string& v) { s.mixed_precision = checked([&] { return parse_mixed_precision(v, "--mixed_precision"); }); },
         "no, fp16, bf16, or fp8 (only for programs that do not link libacc: acc's runtime refuses it)")
      ->option_text("MODE")
      ->group(hardware);
  app.add_option_function<std::string>(
         flag_names("--gpu_ids"), [&](const std::string& v) { s.gpu_ids = checked([&] { return parse_gpu_ids(v, "--gpu_ids"); }); },
         "GPUs of this machine to use, e.g. 0,1 (sets CUDA_VISIBLE_DEVICES); default all")
      ->option_text("IDS")
      ->group(hardware);

  auto* resources = "Processes";
  add_int_flag(app, "--num_processes", "-n", at_least(1), s.num_processes,
               "Total number of processes over all machines; default: one per GPU, else 1")
      ->group(resources);
  add_int_flag(app, "--num_cpu_threads_per_process", "", at_least(1), s.num_cpu_threads_per_process,
               "OMP_NUM_THREADS of each rank; default: cores / local processes, unless already set")
      ->group(resources);
  add_int_flag(app, "--gradient_accumulation_steps", "", at_least(1), s.gradient_accumulation_steps,
               "Sets ACCELERATE_GRADIENT_ACCUMULATION_STEPS for the ranks")
      ->group(resources);

  auto* machines = "Machines (static rendezvous)";
  add_int_flag(app, "--num_machines", "", at_least(1), s.num_machines,
               "Number of machines; start one acc-launch on each")
      ->group(machines);
  add_int_flag(app, "--machine_rank", "", at_least(0), s.machine_rank, "Rank of this machine, 0 for the main one")
      ->group(machines);
  app.add_option_function<std::string>(
         flag_names("--main_process_ip"),
         [&](const std::string& v) { s.main_process_ip = checked([&] { return parse_host(v, "--main_process_ip"); }); },
         "Address of machine 0 (IPv4, IPv6 or host name); default 127.0.0.1")
      ->option_text("ADDR")
      ->group(machines);
  add_int_flag(
      app, "--main_process_port", "", port_range(), s.main_process_port,
      "Rendezvous port on machine 0; 0 picks a free one; default " + std::to_string(env::kDefaultMainProcessPort))
      ->option_text("PORT")
      ->group(machines);
  app.add_option_function<std::string>(
         flag_names("--rdzv_backend"),
         [&](const std::string& v) { s.rdzv_backend = checked([&] { return parse_choice(v, {"static"}, "--rdzv_backend"); }); },
         "Rendezvous method; acc supports static")
      ->option_text("NAME")
      ->group(machines);
  app.add_flag_callback(flag_names("--same_network"), [&] { s.same_network = true; },
                        "Accepted for Accelerate compatibility (static rendezvous always uses --main_process_ip)")
      ->group(machines);

  auto* supervision = "Supervision and output";
  add_int_flag(app, "--max_restarts", "", at_least(0), sup.max_restarts,
               "Restart all ranks up to N times after a failure; default 0")
      ->group(supervision);
  add_seconds_flag(app, "--monitor_interval", 0.001, 60.0, "seconds from 0.001 to 60", sup.monitor_interval_s,
                   "Seconds between checks of the ranks; default 0.1")
      ->group(supervision);
  add_seconds_flag(app, "--heartbeat_timeout", 0.0, 3600.0, "seconds from 0 to 3600", sup.heartbeat_timeout_s,
                   "Several machines: stop this machine's ranks when another machine's acc-launch has not "
                   "answered for this long (0: never); default 30")
      ->group(machines);
  add_seconds_flag(app, "--grace_period", 0.0, 3600.0, "seconds from 0 to 3600", sup.grace_period_s,
                   "Seconds between SIGTERM and SIGKILL when stopping ranks; default 5")
      ->group(supervision);
  app.add_option(flag_names("--log_dir"), sup.log_dir,
                 "Write each rank's output to DIR/attempt_K/rank_R/{stdout,stderr}.log instead of the console")
      ->option_text("DIR")
      ->group(supervision);
  add_int_flag(app, "--tee", "-t", {0, 3, "0, 1, 2 or 3 (1 stdout, 2 stderr, 3 both)"}, sup.tee,
               "With --log_dir, also show 1: stdout, 2: stderr, 3: both on the console; default 0")
      ->option_text("0-3")
      ->group(supervision);
  app.add_flag(flag_names("--no_python"), "Accepted for Accelerate compatibility: programs always run directly")
      ->group(supervision);

  auto* fsdp = "FSDP (with --use_fsdp or distributed_type: FSDP)";
  for (const FsdpOption& option : fsdp_options()) {
    std::string help = option.help;
    if (option.kind == FsdpValueKind::kChoice) {
      help += ": ";
      for (size_t i = 0; i < option.choices.size(); ++i) help += (i ? ", " : "") + option.choices[i];
    }
    if (option.default_value) help += "; default " + *option.default_value;
    app.add_option_function<std::string>(
           flag_names("--" + option.key),
           [&s, &option](const std::string& v) {
             s.fsdp[option.key] = checked([&] { return normalize_fsdp_value(option, v, "--" + option.key); });
           },
           help)
        ->option_text(option.kind == FsdpValueKind::kBool ? "BOOL" : "VALUE")
        ->group(fsdp);
  }
}

void check_flag_combinations(const LaunchInvocation& invocation) {
  const LaunchSettings& s = invocation.flags;
  if (invocation.hardware_flags > 1) throw UsageError("use only one of --cpu, --multi_gpu and --use_fsdp");
  if (s.distributed_type == DistributedType::kMultiGpu && s.num_processes && *s.num_processes < 2)
    throw UsageError("--multi_gpu needs at least 2 processes; drop --multi_gpu or raise --num_processes");
  if (invocation.supervision.tee != 0 && invocation.supervision.log_dir.empty())
    throw UsageError("--tee chooses which streams of the log files also reach the console; add --log_dir DIR");
}

int run_launch(const LaunchInvocation& invocation) {
  const SupervisorOptions& options = invocation.supervision;
  // Paths named on the command line first, without opening them: nothing may block or start on a wrong one.
  check_program_file(options.program.at(0), "give the path of the program to start on every rank");
  check_log_dir(options.log_dir);
  const std::optional<std::string> config_path =
      invocation.config_file ? invocation.config_file : find_default_config();
  LaunchSettings settings = invocation.flags;
  SettingSources sources;
  sources.flags = invocation.flags;
  sources.config_path = config_path;
  if (config_path) {
    const ConfigFile config = read_config_file(*config_path);
    settings = overlay(config.settings, invocation.flags);
    sources.config_lines = config.lines;
    if (!config.ignored_keys.empty() && !options.quiet) {
      std::string keys;
      for (const auto& key : config.ignored_keys) keys += (keys.empty() ? "" : ", ") + key;
      std::cerr << options.tool_name << ": note: " << *config_path << ": ignoring Accelerate settings acc does not use: "
                << keys << "\n";
    }
  }
  const EnvMap env = current_environment();
  LaunchPlan plan = resolve_plan(settings, probe_machine(env), env);
  const bool acc_program = program_links_acc(options.program.at(0));
  // What every rank would refuse at startup is refused here, before any starts, from the environment
  // rank 0 would get. A program that does not link libacc (Python through torch.distributed, a script)
  // may run with what only acc's runtime refuses, so for it that is a note.
  for (const LaunchRefusal& refusal : launch_refusals(rank_environment(plan, 0, 0, 0, env), sources)) {
    if (refusal.every_program) throw UsageError(refusal.message + " (accelerate launch refuses this too); nothing was started");
    if (acc_program)
      throw UsageError(refusal.message + " (every rank of an acc program refuses this at startup; none was started)");
    plan.notes.push_back(refusal.message + " (acc programs refuse this at startup; " + options.program.at(0) +
                         " does not link libacc, so it starts)");
  }
  for (const std::string& note : ignored_fsdp_notes(settings, sources)) plan.notes.push_back(note);
  // Held until every rank has ended, so the port stays this job's across restarts; but only an acc
  // program's rank 0 can serve on it. Any other program binds the port itself: it is released for it
  // (torchrun's race, as before: ranks of another job are still told apart by the job id).
  const bool rank_zero_serves = plan.machine_rank == 0 && acc_program;
  StoreSocket store_socket = reserve_store_socket(plan, /*listen=*/rank_zero_serves);
  if (store_socket.fd() >= 0 && rank_zero_serves) {
    plan.store_listen_fd = store_socket.fd();
  } else {
    store_socket = StoreSocket();
  }
  if (plan.job_id.empty() && plan.num_machines == 1) plan.job_id = new_job_id();
  if (!options.quiet)
    for (const auto& note : plan.notes) std::cerr << options.tool_name << ": note: " << note << "\n";
  if (plan.debug) print_plan(plan, config_path, options);
  std::cerr.flush();
  return supervise(plan, options, env);
}

}  // namespace acc::launcher
