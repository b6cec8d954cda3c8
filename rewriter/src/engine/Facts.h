// Facts: what the rules learn about one translation unit that other steps need: which functions now
// use the accelerator, which models accelerator.prepare takes over, which options the accelerator
// needs, which files now spell the acc API. Each rule declares in its registry entry the facts it
// produces and the facts it consumes (Rule::produces, Rule::consumes); Migration checks every write
// and every read against the running rule's declaration and stops with an error naming both when
// they disagree. So a rule's inputs and outputs are what its entry says, and nothing else: a rule
// never reads another's edits or state.
//
// The finalizers (create-accelerator, include-acc, cmake-link) consume facts: they run after every
// selected rule. A rule that consumes a fact reads it in its end step (after the traversal), and
// runs after the rules that produce it (the order of rules/Rules.def; a unit test checks it).
#pragma once
#include <clang/Basic/SourceLocation.h>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace clang {
class FunctionDecl;
class VarDecl;
}  // namespace clang

namespace accmigrate {

enum Fact : unsigned {
  // Functions that now call `accelerator.`: create-accelerator declares one there or passes it in.
  AcceleratorUsers = 1u << 0,
  // AcceleratorOptions setters (`step_scheduler_with_optimizer(false)`) the accelerator is created with.
  AcceleratorOptions = 1u << 1,
  // Models that an inserted accelerator.prepare(...) places on the device (their moves can go).
  PreparedModels = 1u << 2,
  // Files with an edit that spells the acc API: they include acc/acc.h and link acc.
  FilesUsingAcc = 1u << 3,
  // Print statements rewritten to print on the main process (nothing left to report there).
  RewrittenPrints = 1u << 4,
  // Counts whose comparisons were rewritten to run on gathered tensors: divided by the dataset's size,
  // they are right as written (nothing left to report there).
  GatheredCounts = 1u << 5,
  // Values a process accumulated over its batches that an inserted `v = accelerator.reduce(v, ...);`
  // makes the same on every process, with where: after that point they are rank-uniform.
  ReducedValues = 1u << 6,
  // File writes (std::ofstream openings, create_directories) that write-on-main-process rewrote to
  // happen on the main process, or reported with the lines to write (nothing left to report there).
  HandledWrites = 1u << 7,
};
using FactSet = unsigned;

constexpr Fact kAllFacts[] = {AcceleratorUsers, AcceleratorOptions, PreparedModels, FilesUsingAcc,
                              RewrittenPrints, GatheredCounts, ReducedValues, HandledWrites};

// The name of a fact in messages and docs: "accelerator-users".
const char *factName(Fact fact);

// The facts of one translation unit. Rules reach them only through Migration's checked accessors.
struct Facts {
  std::vector<const clang::FunctionDecl *> acceleratorUsers;  // as written, in the order found
  std::set<std::string> acceleratorOptions;
  std::set<const clang::VarDecl *> preparedModels;
  std::set<clang::FileID> filesUsingAcc;
  std::set<clang::SourceLocation> rewrittenPrints;  // where each rewritten statement begins
  // Where each gathered count is declared: one place for a template's variable and its instantiations'.
  std::set<clang::SourceLocation> gatheredCounts;
  // The same counts, each variable (instantiations' too) with the end of a gathered increment: after
  // the last one the count is the same on every process.
  std::vector<std::pair<const clang::VarDecl *, clang::SourceLocation>> gatheredVars;
  // Each reduced variable (a template's pattern and its instantiations each) and the point after which
  // it is uniform.
  std::vector<std::pair<const clang::VarDecl *, clang::SourceLocation>> reducedValues;
  std::set<clang::SourceLocation> handledWrites;  // where each write begins (the construction, the call)
};

}  // namespace accmigrate
