// What a run produces, independent of Clang: text edits and findings, keyed by file path.
// Translation units fill these; the output stage (Output.cpp, Report.cpp) consumes them.
#pragma once
#include "engine/AcceleratorSummary.h"

#include <set>
#include <string>
#include <vector>

namespace accmigrate {

// One text replacement in a file. Offsets are bytes into the file as it is on disk.
struct Edit {
  std::string file;
  unsigned offset = 0;
  unsigned length = 0;
  std::string text;
  std::string rule;
  unsigned line = 0, column = 0;  // of `offset`, for reports
  // Placement decisions (AcceleratorPlacement.h) of which one must hold for the edit to apply; empty: always.
  std::vector<std::string> onlyIf;
};

// Something the user must look at: code left unchanged because changing it is not safe.
struct Finding {
  enum class Level { Note, Warning, Error };
  std::string file;
  unsigned line = 0, column = 0;
  std::string rule;
  std::string reason;
  std::string suggestion;  // the manual change, as concrete as we can make it
  Level level = Level::Warning;
  std::vector<std::string> onlyIf;  // as Edit::onlyIf
};

// The outcome of parsing and migrating one translation unit.
struct UnitResult {
  std::string mainFile;
  bool parsed = false;
  std::string diagnostic;  // clang's first error when !parsed
  std::vector<Edit> edits;
  std::vector<Finding> findings;
  AcceleratorSummary accelerator;  // for the placement across units (create-accelerator)
  // The --fsdp-units names (as given) of which this unit defines a forward with a body (fsdp-units):
  // a name no unit found is warned about once the run is over.
  std::set<std::string> fsdpUnitsFound;
  // With a --rules selection that leaves out default rules and does nothing in this unit: what the
  // default rules would have done here (runRules), so that the run can say the selection missed it.
  struct LeftOut {
    size_t edits = 0, findings = 0;
    std::set<std::string> rules;  // the default rules that would have acted
  } leftOut;
  // Across files (RankDependence::crossFileKey): the functions this unit defines whose result is the
  // same on every process whatever their arguments, after this unit's rewrites; and the functions it
  // calls, defined elsewhere, whose results it took as differing between processes for want of
  // their bodies. The run parses a unit again when another unit's uniformResults name one of them.
  std::set<std::string> uniformResults;
  std::set<std::string> resultsNotSeen;
};

}  // namespace accmigrate
