#include "config_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include <acc_common/new_file.h>
#include <acc_common/path_kind.h>

#include "did_you_mean.h"
#include "errors.h"
#include "fsdp_options.h"
#include "yaml_aliases.h"

namespace acc::launcher {
namespace fs = std::filesystem;
namespace {

std::string location(const std::string& path, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  // Nodes converted from JSON carry no position.
  if (mark.line < 0) return path + ": ";
  return path + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) + ": ";
}

// JSON is parsed with nlohmann-json and converted, so that both formats share one schema check.
YAML::Node json_to_yaml(const nlohmann::json& j) {
  if (j.is_object()) {
    YAML::Node map(YAML::NodeType::Map);
    for (const auto& [key, value] : j.items()) map[key] = json_to_yaml(value);
    return map;
  }
  if (j.is_array()) {
    YAML::Node seq(YAML::NodeType::Sequence);
    for (const auto& value : j) seq.push_back(json_to_yaml(value));
    return seq;
  }
  if (j.is_null()) return YAML::Node(YAML::NodeType::Null);
  if (j.is_string()) return YAML::Node(j.get<std::string>());
  return YAML::Node(j.dump());
}

[[noreturn]] void refuse_file(const std::string& path, const std::string& problem) {
  throw UsageError("config file '" + path + "' " + problem +
                   "; give --config_file the path of a YAML or JSON config (`acc-config` writes one)");
}

[[noreturn]] void cannot_read(const std::string& path, int error) {
  throw UsageError("cannot read config file '" + path + "' (" + std::strerror(error) +
                   "); check the path given to --config_file, or write a config with `acc-config`");
}

[[noreturn]] void refuse_too_large(const std::string& path, long long size) {
  refuse_file(path, "is " + (size > 0 ? std::to_string(size) + " bytes, " : std::string()) + "over the " +
                        std::to_string(kMaxConfigBytes >> 20) + " MiB limit for configs");
}

void check_regular(const std::string& path, const struct stat& info) {
  if (!S_ISREG(info.st_mode)) {
    refuse_file(path, "is " + common::file_type_words(info.st_mode) + ", not a regular file");
  }
  if (info.st_size > kMaxConfigBytes) refuse_too_large(path, static_cast<long long>(info.st_size));
}

bool is_json_name(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
}

YAML::Node parse_json(const std::string& path, const std::string& text) {
  // Syntax first, strictly, as Accelerate's json.load reads it, with nlohmann's messages. The callback
  // notes a key repeated in an object, which nlohmann's tree would keep only once.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> repeated;
  nlohmann::json tree;
  try {
    tree = nlohmann::json::parse(text, [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
      using Event = nlohmann::json::parse_event_t;
      if (event == Event::object_start) open_objects.emplace_back();
      if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
      if (event == Event::key && !open_objects.empty() &&
          !open_objects.back().insert(parsed.get<std::string>()).second && !repeated)
        repeated = parsed.get<std::string>();
      return true;
    });
  } catch (const nlohmann::json::parse_error& e) {
    size_t line = 1, column = 1;
    for (size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string message = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: " preamble.
    if (auto colon = message.find(": "); colon != std::string::npos) message = message.substr(colon + 2);
    throw UsageError(path + ":" + std::to_string(line) + ":" + std::to_string(column) + ": malformed JSON: " + message);
  }
  // Then the tree from yaml-cpp (JSON is YAML 1.2's flow style), which keeps every key with its line and
  // column: JSON errors name the line as YAML errors do, and check_keys finds repeated keys the same way.
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception&) {
    // yaml-cpp refuses a few valid JSON texts (UTF-16 surrogate pairs such as "\ud83d\ude00", keys over 1024
    // characters). Those are read from nlohmann's tree, without positions.
  }
  if (repeated)
    throw UsageError(path + ": duplicate key " + quoted_value(*repeated) + " in a JSON object; keep only one of them");
  return json_to_yaml(tree);
}

YAML::Node parse_document(const std::string& path) {
  const std::string text = read_config_text(path);
  if (is_json_name(path)) return parse_json(path, text);
  try {
    check_alias_expansion(path, text);  // before anything walks the tree: see yaml_aliases.h
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw UsageError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": malformed YAML: " + e.msg);
  }
}

std::string node_kind(const YAML::Node& node) {
  return node.IsMap() ? "a mapping" : node.IsSequence() ? "a list" : node.IsNull() ? "nothing" : "a value";
}

std::string line_of(const YAML::Mark& mark) { return mark.line < 0 ? "?" : std::to_string(mark.line + 1); }

// YAML and JSON both let a key appear twice in a mapping, and their readers quietly keep one of the values
// (PyYAML and json.load, which Accelerate uses, the last). A repeated key is almost always an edit gone
// wrong, so acc refuses it and names both lines. Keys must be names: yaml-cpp also reads `? [a, b]: 1`.
void check_keys(const std::string& path, const YAML::Node& node) {
  if (node.IsSequence())
    for (const auto& item : node) check_keys(path, item);
  if (!node.IsMap()) return;
  std::map<std::string, YAML::Mark> first_seen;
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar())
      throw UsageError(location(path, key) + "expected a key name, found " + node_kind(key) + "; write `name: value`");
    const auto [seen, first] = first_seen.emplace(key.Scalar(), key.Mark());
    if (!first)
      throw UsageError(location(path, key) + "duplicate key " + quoted_value(key.Scalar()) + ", first set on line " +
                       line_of(seen->second) + "; keep only one of them");
    check_keys(path, entry.second);
  }
}

struct Reader {
  const std::string& path;
  ConfigFile& out;

  void note_line(const std::string& key, const YAML::Node& node) const {
    if (node.Mark().line >= 0) out.lines[key] = node.Mark().line + 1;
  }

  std::string scalar(const YAML::Node& value, const std::string& key) const {
    if (!value.IsScalar())
      throw UsageError(location(path, value) + key + ": expected a single value, found a " +
                       (value.IsMap() ? "mapping" : "list"));
    return value.Scalar();
  }

  // Rethrows a value error with the file position in front of it.
  template <typename F>
  auto at(const YAML::Node& value, F&& parse) const {
    try {
      return parse();
    } catch (const UsageError& e) {
      throw UsageError(location(path, value) + e.what());
    }
  }

  void read_fsdp(const YAML::Node& map) const {
    if (!map.IsMap()) throw UsageError(location(path, map) + "fsdp_config: expected a mapping of fsdp_* keys");
    // The fsdp_ prefix may be left out, so two different keys can set one option.
    std::map<std::string, std::pair<std::string, YAML::Mark>> set_by;
    for (const auto& entry : map) {
      const std::string key = entry.first.Scalar();
      if (entry.second.IsNull()) continue;
      const FsdpOption* option = find_fsdp_option(key);
      if (!option) {
        std::vector<std::string> known;
        for (const auto& o : fsdp_options()) known.push_back(o.key);
        std::string message = location(path, entry.first) + "unknown key " + quoted_value(key) + " in fsdp_config";
        if (auto near = closest_match(key, known)) message += " (did you mean '" + *near + "'?)";
        throw UsageError(message + "; remove it or fix its spelling");
      }
      const auto [other, first] = set_by.emplace(option->key, std::make_pair(key, entry.first.Mark()));
      if (!first)
        throw UsageError(location(path, entry.first) + "duplicate key " + quoted_value(key) +
                         " in fsdp_config: " + quoted_value(other->second.first) + " on line " +
                         line_of(other->second.second) + " sets the same option; keep only one of them");
      out.settings.fsdp[option->key] =
          at(entry.second, [&] { return normalize_fsdp_value(*option, scalar(entry.second, key), key); });
      note_line(option->key, entry.first);
    }
  }
};

using Handler = std::function<void(const Reader&, const YAML::Node&, const std::string&)>;

// Every key of Accelerate's ClusterConfig (plus the legacy `fp16` and `dynamo_backend`), so that any file
// `accelerate config` wrote is accepted; keys acc has no use for are recorded as ignored.
const std::map<std::string, Handler>& handlers() {
  static const std::map<std::string, Handler> table = [] {
    std::map<std::string, Handler> h;
    auto s = [](const Reader& r) -> LaunchSettings& { return r.out.settings; };
    h["compute_environment"] = [](const Reader& r, const YAML::Node& v, const std::string& k) {
      r.at(v, [&] { return parse_choice(r.scalar(v, k), {"LOCAL_MACHINE"}, k + " (acc runs on local machines and clusters, not SageMaker)"); });
    };
    h["distributed_type"] = [s](const Reader& r, const YAML::Node& v, const std::string& k) {
      s(r).distributed_type = r.at(v, [&] { return parse_distributed_type(r.scalar(v, k), k); });
    };
    h["mixed_precision"] = [s](const Reader& r, const YAML::Node& v, const std::string& k) {
      s(r).mixed_precision = r.at(v, [&] { return parse_mixed_precision(r.scalar(v, k), k); });
    };
    h["fp16"] = [s](const Reader& r, const YAML::Node& v, const std::string& k) {
      // Pre-0.6 Accelerate configs: `fp16: true` meant mixed_precision fp16.
      if (r.at(v, [&] { return parse_bool(r.scalar(v, k), k); }) && !s(r).mixed_precision) s(r).mixed_precision = "fp16";
    };
    auto boolean = [s](std::optional<bool> LaunchSettings::*field) {
      return [s, field](const Reader& r, const YAML::Node& v, const std::string& k) {
        s(r).*field = r.at(v, [&] { return parse_bool(r.scalar(v, k), k); });
      };
    };
    auto integer = [s](std::optional<int> LaunchSettings::*field, const IntRange& range) {
      return [s, field, range](const Reader& r, const YAML::Node& v, const std::string& k) {
        s(r).*field = r.at(v, [&] { return parse_int(r.scalar(v, k), k, range); });
      };
    };
    h["use_cpu"] = boolean(&LaunchSettings::use_cpu);
    h["debug"] = boolean(&LaunchSettings::debug);
    h["same_network"] = boolean(&LaunchSettings::same_network);
    // The ranges of the flags, checked here so that errors name the file and line. num_processes: -1 is
    // what `accelerate config` writes for "ask on the command line".
    h["num_processes"] = integer(&LaunchSettings::num_processes,
                                 {1, kMaxCount, "an integer >= 1, or -1 (give it on the command line)", -1});
    h["num_machines"] = integer(&LaunchSettings::num_machines, at_least(1));
    h["machine_rank"] = integer(&LaunchSettings::machine_rank, at_least(0));
    h["main_process_port"] = integer(&LaunchSettings::main_process_port, port_range());
    h["gpu_ids"] = [s](const Reader& r, const YAML::Node& v, const std::string& k) {
      s(r).gpu_ids = r.at(v, [&] { return parse_gpu_ids(r.scalar(v, k), k); });
    };
    h["main_process_ip"] = [s](const Reader& r, const YAML::Node& v, const std::string& k) {
      s(r).main_process_ip = r.at(v, [&] { return parse_host(r.scalar(v, k), k); });
    };
    h["rdzv_backend"] = [s](const Reader& r, const YAML::Node& v, const std::string& k) {
      s(r).rdzv_backend = r.at(v, [&] { return parse_choice(r.scalar(v, k), {"static"}, k); });
    };
    h["fsdp_config"] = [](const Reader& r, const YAML::Node& v, const std::string&) { r.read_fsdp(v); };
    auto ignored = [](const Reader& r, const YAML::Node& v, const std::string& k) {
      // Defaults (false, empty maps) say nothing; only settings someone actually chose are reported.
      // (`accelerate config` writes downcast_bf16: 'no' and main_training_function: main into every file.)
      static const std::vector<std::string> defaults = {"false", "False", "no", "NO", "main"};
      const bool chosen = v.IsMap() || v.IsSequence()
                              ? v.size() > 0
                              : std::find(defaults.begin(), defaults.end(), v.Scalar()) == defaults.end();
      if (chosen) r.out.ignored_keys.push_back(k);
    };
    for (const char* key : {"main_training_function", "enable_cpu_affinity", "downcast_bf16", "fp8_config",
                            "deepspeed_config", "megatron_lm_config", "mpirun_config", "parallelism_config",
                            "dynamo_config", "dynamo_backend", "tpu_name", "tpu_zone", "tpu_use_cluster",
                            "tpu_use_sudo", "command_file", "commands", "tpu_vm", "tpu_env"})
      h[key] = ignored;
    return h;
  }();
  return table;
}

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

std::string cache_home() {
  if (const char* xdg = env_or_null("XDG_CACHE_HOME")) return xdg;
  const char* home = env_or_null("HOME");
  return std::string(home ? home : "") + "/.cache";
}

void emit_scalar(YAML::Emitter& out, const std::string& key, const std::string& value) {
  // PyYAML (YAML 1.1, what Accelerate reads with) takes a bare NO or no for the boolean false, so such
  // words are quoted, as Accelerate's own yaml.safe_dump does.
  std::string lowered = value;
  for (auto& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::vector<std::string> yaml11_booleans = {"y", "n", "yes", "no", "true", "false", "on", "off"};
  out << YAML::Key << key << YAML::Value;
  if (std::find(yaml11_booleans.begin(), yaml11_booleans.end(), lowered) != yaml11_booleans.end())
    out << YAML::SingleQuoted;
  out << value;
}

}  // namespace

std::string read_config_text(const std::string& path) {
  // Checked before opening: opening a FIFO waits for a writer, and some devices act when opened.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) cannot_read(path, errno);
  check_regular(path, info);
  // O_NONBLOCK: had the path been replaced by a FIFO since, open returns at once and fstat refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) cannot_read(path, errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &info) != 0) cannot_read(path, errno);
  check_regular(path, info);
  // Read to the end rather than st_size bytes (files in /proc say 0), but never past the limit.
  std::string text;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) cannot_read(path, errno);
    if (got == 0) return text;
    text.append(buffer, static_cast<size_t>(got));
    if (static_cast<long>(text.size()) > kMaxConfigBytes) refuse_too_large(path, 0);
  }
}

ConfigFile read_config_file(const std::string& path) {
  ConfigFile result{path, {}, {}, {}};
  const YAML::Node root = parse_document(path);
  if (root.IsNull())
    throw UsageError(path + ": the config file is empty; write one with `acc-config` or `acc-config default`");
  if (!root.IsMap()) throw UsageError(location(path, root) + "expected a mapping of settings (key: value)");
  check_keys(path, root);

  const Reader reader{path, result};
  std::vector<std::string> known;
  for (const auto& [key, handler] : handlers()) known.push_back(key);
  for (const auto& entry : root) {
    const std::string key = entry.first.Scalar();
    auto handler = handlers().find(key);
    if (handler == handlers().end()) {
      std::string message = location(path, entry.first) + "unknown key " + quoted_value(key);
      if (auto near = closest_match(key, known)) message += " (did you mean '" + *near + "'?)";
      throw UsageError(message + "; remove it or fix its spelling");
    }
    if (entry.second.IsNull()) continue;  // `key: null` is how Python writes "not set"
    handler->second(reader, entry.second, key);
    if (key != "fsdp_config") reader.note_line(key, entry.first);
  }
  if (!result.settings.distributed_type)
    throw UsageError(path + ": no distributed_type; add `distributed_type: NO` (or MULTI_CPU, MULTI_GPU, FSDP)");
  return result;
}

void write_config_file(const std::string& path, const LaunchSettings& s) {
  // Keys in sorted order, as Accelerate's yaml.safe_dump writes them.
  YAML::Emitter out;
  out << YAML::BeginMap;
  emit_scalar(out, "compute_environment", "LOCAL_MACHINE");
  if (s.debug) out << YAML::Key << "debug" << YAML::Value << *s.debug;
  emit_scalar(out, "distributed_type", to_string(s.distributed_type.value_or(DistributedType::kNo)));
  if (!s.fsdp.empty()) {
    out << YAML::Key << "fsdp_config" << YAML::Value << YAML::BeginMap;
    for (const auto& [key, value] : s.fsdp) {
      const FsdpOption* option = find_fsdp_option(key);
      out << YAML::Key << key << YAML::Value;
      if (option && option->kind == FsdpValueKind::kBool) out << (value == "true");
      else if (option && option->kind == FsdpValueKind::kInt) out << std::stol(value);
      else out << value;
    }
    out << YAML::EndMap;
  }
  if (s.gpu_ids) emit_scalar(out, "gpu_ids", *s.gpu_ids);
  if (s.machine_rank) out << YAML::Key << "machine_rank" << YAML::Value << *s.machine_rank;
  if (s.main_process_ip) emit_scalar(out, "main_process_ip", *s.main_process_ip);
  if (s.main_process_port) out << YAML::Key << "main_process_port" << YAML::Value << *s.main_process_port;
  emit_scalar(out, "mixed_precision", s.mixed_precision.value_or("no"));
  if (s.num_machines) out << YAML::Key << "num_machines" << YAML::Value << *s.num_machines;
  if (s.num_processes) out << YAML::Key << "num_processes" << YAML::Value << *s.num_processes;
  if (s.rdzv_backend) emit_scalar(out, "rdzv_backend", *s.rdzv_backend);
  if (s.same_network) out << YAML::Key << "same_network" << YAML::Value << *s.same_network;
  if (s.use_cpu) out << YAML::Key << "use_cpu" << YAML::Value << *s.use_cpu;
  out << YAML::EndMap;

  check_config_target(path);
  const fs::path target(path);
  const fs::path directory = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code created;
  fs::create_directories(directory, created);
  if (created)
    throw UsageError("cannot create the directory '" + directory.string() + "' for the config " + path + ": " +
                     created.message() + "; choose another place with --config_file");
  // Through a new file under a random name beside the config, never through a fixed "<path>.tmp": in a
  // directory others can write to, a link planted at a fixed name would make acc-config write over the
  // link's target and then rename that link into place as the config. The rename also means a crash
  // never leaves half a config. Mode 0666 before the umask, as any file a user creates.
  const std::string failed = common::replace_file(path, std::string(out.c_str()) + "\n", 0666);
  if (!failed.empty())
    throw UsageError(failed + "; the config was not written: check that you can write to " +
                     (target.has_parent_path() ? "'" + directory.string() + "'" : "the current directory") +
                     ", or choose another place with --config_file");
}

void check_config_target(const std::string& path) {
  const common::PathKind kind = common::inspect_path(path);
  // An existing config, or a link to one (the link is replaced by the config, as before).
  if (kind.regular()) return;
  // A new path (or a dangling link, replaced by the config). Other failures (a parent that is a file,
  // no permission) are named by the write itself.
  if (!kind.exists()) return;
  if (kind.directory())
    throw UsageError("'" + path + "' is " + kind.description() +
                     "; name the config file itself with --config_file (for example " +
                     (fs::path(path) / "default_config.yaml").string() + ")");
  // The config is renamed into place: over a device, a FIFO or a socket that would put a regular file
  // where the node was (as root, /dev/null or /dev/full for everyone).
  throw UsageError("'" + path + "' is " + kind.description() +
                   ", not a config file; acc-config writes a config only over a regular file or at a new path, and "
                   "leaves this one alone: choose another path with --config_file");
}

std::string acc_default_config_path() {
  if (const char* explicit_path = env_or_null("ACC_CONFIG_FILE")) return explicit_path;
  return cache_home() + "/acc/default_config.yaml";
}

std::string accelerate_default_config_path() {
  if (const char* hf_home = env_or_null("HF_HOME")) return std::string(hf_home) + "/accelerate/default_config.yaml";
  return cache_home() + "/huggingface/accelerate/default_config.yaml";
}

std::optional<std::string> find_default_config() {
  // ACC_CONFIG_FILE names one file on purpose: like a --config_file that Accelerate was given, it must be
  // a config (Accelerate's load_config_from_file raises FileNotFoundError for a config_file that is not a
  // file, rather than falling back to its default), so anything else is an error, never passed over.
  if (const char* pointed = env_or_null("ACC_CONFIG_FILE")) {
    const common::PathKind kind = common::inspect_path(pointed);
    if (kind.regular()) return std::string(pointed);
    const std::string named = "ACC_CONFIG_FILE names '" + std::string(pointed) + "', which ";
    if (kind.error == ENOENT && !kind.is_link)
      throw UsageError(named + "does not exist; write a config there with `acc-config default`, or unset ACC_CONFIG_FILE");
    throw UsageError(named + "is " + kind.description() +
                     ", not a config file; point ACC_CONFIG_FILE at a config file (acc-config writes one), or unset it");
  }
  for (const std::string& candidate : {acc_default_config_path(), accelerate_default_config_path()})
    if (common::inspect_path(candidate).regular()) return candidate;
  return std::nullopt;
}

}  // namespace acc::launcher
