#include <acc/environment.h>
#include <acc/errors.h>
#include <acc/options.h>
#include <acc_common/refused_settings.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

namespace acc {

namespace {
std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Each enum's values and their names, which to_string writes and parse_* reads.
template <typename Enum>
struct Named {
  Enum value;
  const char* name;
};

constexpr Named<MixedPrecision> kMixedPrecisionNames[] = {
    {MixedPrecision::NO, "no"},
    {MixedPrecision::FP16, "fp16"},
    {MixedPrecision::BF16, "bf16"},
};

constexpr Named<DistributedType> kDistributedTypeNames[] = {
    {DistributedType::NO, "NO"},
    {DistributedType::MULTI_CPU, "MULTI_CPU"},
    {DistributedType::MULTI_GPU, "MULTI_GPU"},
    {DistributedType::FSDP, "FSDP"},
};

template <typename Enum, size_t N>
std::string name_of(Enum value, const Named<Enum> (&table)[N]) {
  for (const auto& row : table) {
    if (row.value == value) return row.name;
  }
  return "?";
}

template <typename Enum, size_t N>
std::optional<Enum> value_named(const std::string& name, const Named<Enum> (&table)[N]) {
  for (const auto& row : table) {
    if (row.name == name) return row.value;
  }
  return std::nullopt;
}

template <typename Enum, size_t N>
std::string names_of(const Named<Enum> (&table)[N]) {
  std::string out;
  for (const auto& row : table) out += (out.empty() ? "" : ", ") + std::string(row.name);
  return out;
}
}  // namespace

std::string to_string(MixedPrecision value) { return name_of(value, kMixedPrecisionNames); }

std::string to_string(DistributedType value) { return name_of(value, kDistributedTypeNames); }

MixedPrecision parse_mixed_precision(const std::string& text, const std::string& source) {
  auto value = lower(text);
  if (const auto named = value_named(value, kMixedPrecisionNames)) return *named;
  // acc-launch refuses the same before starting the ranks (acc_common/refused_settings.h).
  if (const auto refusal = common::refuse_mixed_precision(value)) {
    throw ConfigError("acc: mixed precision '" + text + "' (" + source + ") is not supported: " + refusal->why +
                      "; " + refusal->fix);
  }
  throw ConfigError("acc: unknown mixed precision '" + text + "' (" + source + "); expected one of " +
                    names_of(kMixedPrecisionNames));
}

bool parse_env_bool(const std::string& name, const std::string& value) {
  // The spellings acc-launch reads too, when it judges a launch before starting it.
  if (const auto parsed = common::parse_boolean(value)) return *parsed;
  throw ConfigError("acc: " + name + "='" + value +
                    "' is not a boolean; use one of 1/0, true/false, yes/no, on/off");
}

ResolvedOptions resolve_options(const AcceleratorOptions& options) {
  const EnvLookup& env = options.environment();
  ResolvedOptions out;

  if (options.cpu()) {
    out.cpu = *options.cpu();
  } else if (auto v = env(env::kUseCpu)) {
    out.cpu = parse_env_bool(env::kUseCpu, *v);
  }

  if (options.mixed_precision()) {
    out.mixed_precision = *options.mixed_precision();
  } else if (auto v = env(env::kMixedPrecision)) {
    out.mixed_precision = parse_mixed_precision(*v, env::kMixedPrecision);
  }

  if (options.gradient_accumulation_steps()) {
    out.gradient_accumulation_steps = *options.gradient_accumulation_steps();
    if (out.gradient_accumulation_steps < 1) {
      throw ConfigError("acc: gradient_accumulation_steps(" +
                        std::to_string(out.gradient_accumulation_steps) + ") must be at least 1");
    }
  } else if (auto v = env(env::kGradientAccumulationSteps)) {
    size_t used = 0;
    long long steps = 0;
    try {
      steps = std::stoll(*v, &used);
    } catch (const std::logic_error&) {
      used = 0;
    }
    if (used == 0 || used != v->size() || steps < 1) {
      throw ConfigError("acc: ACCELERATE_GRADIENT_ACCUMULATION_STEPS='" + *v +
                        "' must be an integer >= 1");
    }
    out.gradient_accumulation_steps = steps;
  }

  // Checked here, not when DDP starts, so that a one-process run reports it too.
  for (auto [name, value] : {std::pair{"bucket_cap_mb", options.ddp().bucket_cap_mb()},
                             std::pair{"first_bucket_cap_mb", options.ddp().first_bucket_cap_mb()}}) {
    if (!(value > 0)) {
      throw ConfigError(std::string("acc: DistributedDataParallelKwargs ") + name + "(" +
                        std::to_string(value) + ") must be a positive number of MiB");
    }
  }

  if (options.fsdp_plugin()) {
    out.use_fsdp = true;
  } else if (auto v = env(env::kUseFsdp)) {
    out.use_fsdp = parse_env_bool(env::kUseFsdp, *v);
  }
  // FSDP_* are read only when FSDP is on, as Accelerate's plugin does.
  if (out.use_fsdp) {
    out.fsdp = resolve_fsdp_plugin(options.fsdp_plugin().value_or(FullyShardedDataParallelPlugin()), env);
  }
  if (auto v = env(env::kTorchDevice); v && !v->empty()) out.torch_device = *v;
  if (const auto& backend = options.backend()) {
    if (*backend != "nccl" && *backend != "gloo") {
      throw ConfigError("acc: backend(\"" + *backend + "\") is not a backend acc runs on; use \"nccl\" "
                        "(CUDA, a GPU of its own for each rank) or \"gloo\" (CPU, or CUDA with ranks "
                        "sharing GPUs)");
    }
    out.backend = backend;
  }
  return out;
}

}  // namespace acc
