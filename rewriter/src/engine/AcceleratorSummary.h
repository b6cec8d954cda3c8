// What create-accelerator learns about one translation unit for the project-level placement of the
// accelerator (AcceleratorPlacement.h). Each unit is parsed alone, so one unit cannot tell whether a
// function it sees is called from another file; it records its functions and calls by a cross-unit
// identity (clang's USR) instead, and its candidate edits carry the decision they depend on
// (Edit::onlyIf): `param:<usr>` (the function takes `acc::Accelerator& accelerator` and its calls
// pass it) or `local:<usr>` (the function declares the accelerator).
#pragma once
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace accmigrate {

struct PlacedFunction {
  std::string usr;
  std::string name;  // for findings
  std::string file;  // where it is declared, for findings
  unsigned line = 0, column = 0;
  bool usesAccelerator = false;  // a rule wrote `accelerator.` into it (accelerator-users)
  bool hasAccelerator = false;   // already declares or receives one (migrated code)
  bool isMain = false, isVirtual = false;
};

struct AcceleratorSummary {
  std::vector<PlacedFunction> functions;
  std::vector<std::pair<std::string, std::string>> calls;  // caller USR -> callee USR, project functions
  std::set<std::string> options;                           // accelerator-options of the unit
};

}  // namespace accmigrate
