#pragma once
// What a launch can be configured with, from any source (command line, config file). Every field is
// optional so that sources can be layered: command line over config file over defaults (Accelerate's
// precedence); resolve_plan() applies the defaults.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace acc::launcher {

// Accelerate's distributed_type values that acc supports (others are rejected when read).
enum class DistributedType { kNo, kMultiCpu, kMultiGpu, kFsdp };

struct LaunchSettings {
  std::optional<DistributedType> distributed_type;
  std::optional<std::string> mixed_precision;  // no | fp16 | bf16 | fp8 (refused for acc programs)
  std::optional<bool> use_cpu;
  std::optional<bool> debug;
  std::optional<int> num_processes;  // total over all machines; -1 in a config means "give it on the command line"
  std::optional<int> num_machines;
  std::optional<int> machine_rank;
  std::optional<std::string> gpu_ids;  // "all" or a comma-separated list
  std::optional<std::string> main_process_ip;
  std::optional<int> main_process_port;  // 0 picks a free port
  std::optional<std::string> rdzv_backend;  // only "static"
  std::optional<bool> same_network;
  std::optional<int> gradient_accumulation_steps;
  std::optional<int> num_cpu_threads_per_process;
  // FSDP options by their config key ("fsdp_sharding_strategy"), values already normalized (fsdp_options.h).
  std::map<std::string, std::string> fsdp;
};

// `top` wins wherever it sets a field; FSDP options merge key by key.
LaunchSettings overlay(const LaunchSettings& base, const LaunchSettings& top);

// Accelerate's spelling of a distributed type ("MULTI_GPU") and back. parse throws UsageError listing the
// allowed values; `what` names the setting in that message.
std::string to_string(DistributedType type);
DistributedType parse_distributed_type(const std::string& value, const std::string& what);

// The values an integer setting allows: checked by parse_int and stated in its message.
struct IntRange {
  int min = 0;
  int max = 0;
  std::string allowed;           // how the message states them: "an integer >= 1"
  std::optional<int> also = {};  // one more value outside [min, max] (a config's num_processes: -1)
};
// Counts above this are typos, not clusters.
inline constexpr int kMaxCount = 1000000000;
// "an integer >= N", up to kMaxCount.
IntRange at_least(int min_value);
// The rendezvous port: 0-65535, where 0 picks a free port.
IntRange port_range();

// Value checks shared by flags, config files and the questionnaire. Each throws UsageError with one line
// that names the setting (`what`), the bad value and the allowed values.
std::string parse_mixed_precision(const std::string& value, const std::string& what);
// The modes acc's runtime runs (no, fp16, bf16), for what acc-config writes: fp8, which acc-launch still
// passes to programs that do not link libacc, is refused saying why (acc_common/refused_settings.h).
std::string parse_acc_mixed_precision(const std::string& value, const std::string& what);
bool parse_bool(const std::string& value, const std::string& what);
std::string parse_choice(const std::string& value, const std::vector<std::string>& allowed, const std::string& what);
int parse_int(const std::string& value, const std::string& what, const IntRange& range);
int parse_int(const std::string& value, const std::string& what, int min_value);  // at_least(min_value)
// A decimal number in [min, max] (seconds of the supervision flags); `allowed` states the range.
double parse_number(const std::string& value, const std::string& what, double min, double max,
                    const std::string& allowed);
std::string parse_gpu_ids(const std::string& value, const std::string& what);
// main_process_ip: an IPv4 or IPv6 address, or a host name as RFC 1123 spells them. Syntax only: nothing is
// looked up (the machine may be offline; a well-formed name that does not resolve fails at the rendezvous).
std::string parse_host(const std::string& value, const std::string& what);
// `value` as error messages show it: quoted, control characters escaped (messages stay one line), and
// cut after 60 characters.
std::string quoted_value(const std::string& value);

}  // namespace acc::launcher
