#pragma once
// Accelerate's config file format (the ClusterConfig of `accelerate config`): reading, writing and where
// the default file lives. YAML is read with yaml-cpp, JSON (names ending in .json) with nlohmann-json.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launch_settings.h"

namespace acc::launcher {

struct ConfigFile {
  std::string path;
  LaunchSettings settings;
  // Accelerate settings present in the file that acc has no use for (DeepSpeed, TPU, dynamo ...): they are
  // accepted so that an existing file works unchanged, and reported so that nobody relies on them.
  std::vector<std::string> ignored_keys;
  // The line (1-based) of each key that set something, for messages about settings that pass the schema
  // but cannot run (launch_refusals.h); fsdp_config's keys by their option's full name ("fsdp_version").
  // Empty for the rare JSON read without positions.
  std::map<std::string, int> lines;
};

// Throws UsageError with "path:line:column: problem; fix" for malformed files, unknown keys (naming the
// closest known key) and bad values (listing the allowed ones).
ConfigFile read_config_file(const std::string& path);

// The largest config file read. Accelerate's configs are well under 4 KiB, even with a DeepSpeed section;
// 1 MiB leaves room for anything hand-written while a wrong path (a log, a checkpoint, a disk image) is
// refused at once instead of being read into memory and parsed into a tree many times its size.
inline constexpr long kMaxConfigBytes = 1 << 20;

// The text of a config file. Anything but a regular file (a directory, a FIFO, a device, a socket) is
// refused before it is opened, so nothing blocks; so is a file larger than kMaxConfigBytes. Throws
// UsageError naming the path and what it is.
std::string read_config_text(const std::string& path);

// Writes `settings` in Accelerate's schema (readable by `accelerate launch` too), creating parent
// directories. Writes a new file under a random name beside it (O_EXCL|O_NOFOLLOW: nothing planted there
// is followed) and renames it into place, so a crash never leaves half a config. Throws UsageError naming
// the path and the fix when it cannot be written.
void write_config_file(const std::string& path, const LaunchSettings& settings);

// Whether a config may be written at `path`: a regular file (or a link to one) or a new path. A
// directory, a FIFO, a device, a socket, or a link to one of them is refused with a UsageError naming
// what it is (writing means renaming a new file over the name: that would replace a device node).
// Looks without opening. write_config_file checks this too; acc-config checks it before asking anything.
void check_config_target(const std::string& path);

// acc's own default: $ACC_CONFIG_FILE, else ${XDG_CACHE_HOME:-~/.cache}/acc/default_config.yaml.
std::string acc_default_config_path();
// Accelerate's default: $HF_HOME/accelerate/..., else ${XDG_CACHE_HOME:-~/.cache}/huggingface/accelerate/...
std::string accelerate_default_config_path();
// The config acc-launch uses when no --config_file is given: the file $ACC_CONFIG_FILE names (a
// UsageError when that is missing or not a regular file), else acc's default file if it exists, else
// Accelerate's, else none.
std::optional<std::string> find_default_config();

}  // namespace acc::launcher
