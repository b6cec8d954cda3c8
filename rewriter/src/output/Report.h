// Machine-readable results: a JSON report of the run, and SARIF 2.1.0 for code-review tools.
#pragma once
#include "engine/Result.h"
#include "engine/Rule.h"
#include "output/Output.h"
#include "output/ParseFailures.h"

#include <string>
#include <vector>

namespace accmigrate {

struct RunSummary {
  std::vector<UnitResult> units;
  std::vector<FileChange> changes;
  std::vector<Finding> findings;  // deduplicated, sorted
  std::vector<ParseFailure> failures;  // the units that did not parse
};

bool writeJsonReport(const RunSummary &run, const std::string &file, std::string &error);
bool writeSarif(const RunSummary &run, const std::vector<const Rule *> &rules, const std::string &file,
                std::string &error);

}  // namespace accmigrate
