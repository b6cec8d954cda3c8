#include "launch_settings.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <acc_common/refused_settings.h>

#include "did_you_mean.h"
#include "errors.h"

namespace acc::launcher {
namespace {

template <typename T>
void take(std::optional<T>& into, const std::optional<T>& from) {
  if (from) into = from;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

const std::vector<std::pair<DistributedType, std::string>>& distributed_type_names() {
  static const std::vector<std::pair<DistributedType, std::string>> names = {
      {DistributedType::kNo, "NO"},
      {DistributedType::kMultiCpu, "MULTI_CPU"},
      {DistributedType::kMultiGpu, "MULTI_GPU"},
      {DistributedType::kFsdp, "FSDP"}};
  return names;
}

bool is_ipv4(const std::string& value) {
  in_addr address{};
  return ::inet_pton(AF_INET, value.c_str(), &address) == 1;
}

// An IPv6 address, with an optional zone for link-local addresses ("fe80::1%eth0"), as getaddrinfo takes it.
bool is_ipv6(const std::string& value) {
  const size_t percent = value.find('%');
  const std::string address = value.substr(0, percent);
  if (percent != std::string::npos) {
    const std::string zone = value.substr(percent + 1);
    if (zone.empty() || !std::all_of(zone.begin(), zone.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '_' || c == '-' || c == '.';
        }))
      return false;
  }
  in6_addr parsed{};
  return ::inet_pton(AF_INET6, address.c_str(), &parsed) == 1;
}

// RFC 1123: labels of 1-63 letters, digits and hyphens, not starting or ending with a hyphen; at most 253
// characters; a fully qualified name may end in a dot. The last label is never all digits (RFC 3696 2.),
// so "999.1.1.1" and "1.2.3.4.5" are bad addresses, not names.
bool is_host_name(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  if (name.empty() || name.size() > 253) return false;
  std::string_view label;
  while (!name.empty()) {
    const size_t dot = name.find('.');
    label = name.substr(0, dot);
    name = dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    if (!std::all_of(label.begin(), label.end(), [](unsigned char c) { return std::isalnum(c) || c == '-'; }))
      return false;
    if (dot != std::string_view::npos && name.empty()) return false;  // "a..b" or a second trailing dot
  }
  return !std::all_of(label.begin(), label.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

LaunchSettings overlay(const LaunchSettings& base, const LaunchSettings& top) {
  LaunchSettings out = base;
  take(out.distributed_type, top.distributed_type);
  take(out.mixed_precision, top.mixed_precision);
  take(out.use_cpu, top.use_cpu);
  take(out.debug, top.debug);
  take(out.num_processes, top.num_processes);
  take(out.num_machines, top.num_machines);
  take(out.machine_rank, top.machine_rank);
  take(out.gpu_ids, top.gpu_ids);
  take(out.main_process_ip, top.main_process_ip);
  take(out.main_process_port, top.main_process_port);
  take(out.rdzv_backend, top.rdzv_backend);
  take(out.same_network, top.same_network);
  take(out.gradient_accumulation_steps, top.gradient_accumulation_steps);
  take(out.num_cpu_threads_per_process, top.num_cpu_threads_per_process);
  for (const auto& [key, value] : top.fsdp) out.fsdp[key] = value;
  return out;
}

std::string to_string(DistributedType type) {
  for (const auto& [t, name] : distributed_type_names())
    if (t == type) return name;
  return "NO";
}

DistributedType parse_distributed_type(const std::string& value, const std::string& what) {
  for (const auto& [t, name] : distributed_type_names())
    if (upper(value) == name) return t;
  // Accelerate's other types (DEEPSPEED, XLA, MEGATRON_LM, MULTI_NPU, ...) are real but not acc's.
  throw UsageError(what + ": distributed type " + quoted_value(value) +
                   " is not supported by acc; use one of NO, MULTI_CPU, MULTI_GPU, FSDP");
}

std::string parse_choice(const std::string& value, const std::vector<std::string>& allowed, const std::string& what) {
  for (const auto& choice : allowed)
    if (choice == value) return choice;
  std::string message = what + ": bad value " + quoted_value(value) + "; allowed values: " + join(allowed);
  if (auto near = closest_match(value, allowed)) message += " (did you mean '" + *near + "'?)";
  throw UsageError(message);
}

std::string parse_mixed_precision(const std::string& value, const std::string& what) {
  return parse_choice(lower(value), {"no", "fp16", "bf16", "fp8"}, what);
}

std::string parse_acc_mixed_precision(const std::string& value, const std::string& what) {
  if (const auto refusal = common::refuse_mixed_precision(value))
    throw UsageError(what + ": " + refusal->why + "; " + refusal->fix);
  return parse_choice(lower(value), {"no", "fp16", "bf16"}, what);
}

bool parse_bool(const std::string& value, const std::string& what) {
  // The spellings Accelerate's str_to_bool and YAML both accept.
  const std::string v = lower(value);
  if (v == "true" || v == "yes" || v == "y" || v == "on" || v == "t" || v == "1") return true;
  if (v == "false" || v == "no" || v == "n" || v == "off" || v == "f" || v == "0") return false;
  throw UsageError(what + ": bad value " + quoted_value(value) + "; allowed values: true, false");
}

IntRange at_least(int min_value) { return {min_value, kMaxCount, "an integer >= " + std::to_string(min_value)}; }

IntRange port_range() { return {0, 65535, "a port 0-65535 (0 = a free port)"}; }

int parse_int(const std::string& value, const std::string& what, const IntRange& range) {
  // Whole decimal integers only: "2.5", "0x10", " 3" and the empty string are refused, not cut short.
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);  // LLONG_MIN/MAX (ERANGE) when out of range
  const bool digits =
      !value.empty() && end == value.c_str() + value.size() && !std::isspace(static_cast<unsigned char>(value.front()));
  if (digits && ((parsed >= range.min && parsed <= range.max) || (range.also && parsed == *range.also)))
    return static_cast<int>(parsed);
  std::string message = what + ": bad value " + quoted_value(value) + "; expected " + range.allowed;
  // A value above the limit is stated against it, unless the allowed values already name the limit.
  if (digits && parsed > range.max && range.allowed.find(std::to_string(range.max)) == std::string::npos)
    message += " (at most " + std::to_string(range.max) + ")";
  throw UsageError(message);
}

int parse_int(const std::string& value, const std::string& what, int min_value) {
  return parse_int(value, what, at_least(min_value));
}

double parse_number(const std::string& value, const std::string& what, double min, double max,
                    const std::string& allowed) {
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  const bool number = !value.empty() && end == value.c_str() + value.size() && std::isfinite(parsed) &&
                      !std::isspace(static_cast<unsigned char>(value.front()));
  if (number && parsed >= min && parsed <= max) return parsed;
  throw UsageError(what + ": bad value " + quoted_value(value) + "; expected " + allowed);
}

std::string parse_gpu_ids(const std::string& value, const std::string& what) {
  if (lower(value) == "all") return "all";
  // A comma-separated list of device indices (or UUIDs, which CUDA_VISIBLE_DEVICES also accepts).
  bool ok = !value.empty() && value.front() != ',' && value.back() != ',' && value.find(",,") == std::string::npos &&
            std::all_of(value.begin(), value.end(),
                        [](unsigned char c) { return std::isalnum(c) || c == ',' || c == '-'; });
  if (!ok) throw UsageError(what + ": bad value " + quoted_value(value) + "; expected 'all' or GPU ids like '0,1'");
  return value;
}

std::string parse_host(const std::string& value, const std::string& what) {
  if (is_ipv4(value) || is_ipv6(value) || is_host_name(value)) return value;
  throw UsageError(
      what + ": bad value " + quoted_value(value) +
      "; expected an IPv4 address (10.0.0.1), an IPv6 address (fd00::1) or a host name (node-0.example.com)");
}

std::string quoted_value(const std::string& value) {
  constexpr size_t kShown = 60;
  std::string out = "'";
  for (size_t i = 0; i < value.size() && i < kShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char escaped[5];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (value.size() > kShown) out += "...";
  return out + "'";
}

}  // namespace acc::launcher
