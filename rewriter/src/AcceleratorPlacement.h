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
#include "Result.h"

#include <set>
#include <string>
#include <vector>

namespace accmigrate {

// `acc::Accelerator accelerator;`, or with the AcceleratorOptions setters (`step_scheduler_with_optimizer(false)`).
std::string acceleratorDeclaration(const std::set<std::string> &options);

// The decisions that hold for these summaries, and the findings they raise.
std::set<std::string> placeAccelerator(const std::vector<const AcceleratorSummary *> &summaries,
                                       std::vector<Finding> &findings);

// Solves the placement over `units` (parsed ones), then keeps in each unit only the edits and findings
// whose decision holds; the kept declarations get the options of every unit. New findings go to the
// first parsed unit.
void applyAcceleratorPlacement(std::vector<UnitResult> &units);

}  // namespace accmigrate
