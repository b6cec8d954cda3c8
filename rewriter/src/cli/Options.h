// The command line of acc-migrate.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accmigrate {

enum class ColorMode { Auto, Always, Never };

struct Options {
  std::vector<std::string> inputs;     // files and directories to migrate
  std::vector<std::string> extraArgs;  // compiler arguments after `--`
  std::string buildDir;                // -p: directory holding compile_commands.json
  std::string torchDir;                // --torch: libtorch or the torch Python package
  std::string accInclude;              // --acc-include: directory holding acc/acc.h
  bool inPlace = false;
  std::string backupSuffix;
  std::string outputDir;
  std::string reportFile;
  std::string sarifFile;
  ColorMode color = ColorMode::Auto;
  bool listRules = false;
  std::string rules;
  std::vector<std::string> fsdpUnits;  // --fsdp-units: module types whose forward gets the FSDP guard
  std::string pchCache;  // directory of cached torch PCHs; "" disables them
  // Bytes: --pch-cache-limit, else $ACC_MIGRATE_CACHE_LIMIT, else kDefaultPchCacheLimit (PchCache.h).
  uint64_t pchCacheLimit = uint64_t(2) << 30;
  unsigned jobs = 0;  // 0: one per hardware thread
  // --report/--sarif FIFOs with a reader, opened when the options were checked and never closed: the
  // reader then sees one stream that ends after the report, not an end before the run has written.
  std::vector<int> heldOutputs;
};

// Exit codes, as documented in --help.
enum ExitCode { ExitOk = 0, ExitSomeFilesFailed = 1, ExitUsage = 2 };

// Parses argv into `out`. Returns std::nullopt to go on, or the exit code to stop with (usage errors
// are printed with the fix; --help and --version print and stop with 0).
std::optional<int> parseOptions(int argc, const char **argv, Options &out);

}  // namespace accmigrate
