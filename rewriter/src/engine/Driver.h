// Parses translation units (in parallel) and applies the selected rules to each.
#pragma once
#include "engine/Migration.h"
#include "engine/Result.h"
#include "engine/Rule.h"
#include "project/PchCache.h"

#include <clang/Tooling/CompilationDatabase.h>
#include <string>
#include <vector>

namespace accmigrate {

struct DriverConfig {
  const clang::tooling::CompilationDatabase *database = nullptr;
  const ProjectScope *scope = nullptr;
  std::vector<const Rule *> rules;  // the selected rules; the finalizers always run after them
  RuleSettings settings;            // what the command line tells the rules (--fsdp-units)
  std::vector<std::string> extraArgs;
  unsigned jobs = 1;
  PchCache *pch = nullptr;  // null: every file parses torch's headers in full
  bool progress = false;  // a progress line on stderr (a terminal, several files)
};

// One result per file, in the order of `files`.
std::vector<UnitResult> runUnits(const std::vector<std::string> &files, const DriverConfig &config);

}  // namespace accmigrate
