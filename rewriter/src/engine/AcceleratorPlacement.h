// Where the accelerator lives, decided once for the whole run, over the calls of every translation
// unit (their AcceleratorSummary), before their edits are merged.
//
// The entry point declares it: `main`, or, when the scope has no `main`, each function no project
// function calls. Every function on a call path from an entry point to a function that uses the
// accelerator takes it as a parameter (`param:<usr>`), so the program has one accelerator however its
// training code is split into functions, files and headers. A function that uses it but that no
// project function calls, in a scope with `main`, also takes a parameter, with a finding: its caller is
// outside the scope. A virtual function called from others declares its own, with a finding.
#pragma once
#include "engine/Result.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace accmigrate {

// `acc::Accelerator accelerator;`, or with the AcceleratorOptions setters (`step_scheduler_with_optimizer(false)`).
std::string acceleratorDeclaration(const std::set<std::string> &options);

struct Placement {
  std::set<std::string> decisions;  // local:<usr>, param:<usr>, uses:<usr>
  // For each local:<usr>: the accelerator options of the units whose accelerator users it reaches
  // (one program's scheduler does not change another program's accelerator).
  std::map<std::string, std::set<std::string>> options;
};

// The decisions that hold for these summaries, and the findings they raise.
Placement placeAccelerator(const std::vector<const AcceleratorSummary *> &summaries, std::vector<Finding> &findings);

// Solves the placement over `units` (parsed ones), then keeps in each unit only the edits and findings
// whose decision holds; each kept declaration gets the options of the code it reaches. New findings go to the
// first parsed unit.
void applyAcceleratorPlacement(std::vector<UnitResult> &units);

}  // namespace accmigrate
