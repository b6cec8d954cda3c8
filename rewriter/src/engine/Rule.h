// A rule is data: a name (for --rules and reports), a one-line explanation (for --list-rules), whether
// it runs by default, the facts it produces and consumes (Facts.h), and the function that registers
// its matchers (and end steps) for one translation unit: every rule's matchers join one MatchFinder,
// which traverses the unit once. Each is one line of rules/Rules.def (the list the registry is built
// from), lives in rules/<Name>.cpp and has its own lit test, rewriter/test/<name>.cpp, which runs it
// alone (--rules=<name>).
//
// Two kinds, two lists:
// - rules (allRules): the per-match rewrites and reports; --rules selects them. They stand alone:
//   what they need from other rules comes only through the facts they declare.
// - finalizers (allFinalizers): create-accelerator, include-acc, cmake-link. They always run, after
//   the selected rules, and turn the facts into edits and reports (declare the accelerator where
//   it is used, include acc/acc.h, link acc). --rules cannot select or drop them.
#pragma once
#include "engine/Facts.h"

#include <llvm/ADT/StringRef.h>
#include <set>
#include <string>
#include <vector>

namespace accmigrate {

class Migration;

// What the run tells rules beyond selecting them: the command line (--fsdp-units=...) and what the
// other files of the run showed. The same for every unit.
struct RuleSettings {
  // fsdp-units: the module types (as given: `Block`, `ns::Block` or `BlockImpl`) whose forward gets the guard.
  std::vector<std::string> fsdpUnits;
  // The project's functions defined in other files whose result is the same on every process
  // whatever their arguments (RankDependence::crossFileKey; UnitResult::uniformResults).
  std::set<std::string> uniformResultsElsewhere;
};

struct Rule {
  const char *name;
  const char *summary;
  bool enabledByDefault;  // finalizers always run
  FactSet produces;       // facts it writes (Migration checks every write)
  FactSet consumes;       // facts it reads (Migration checks every read)
  // Sets the rule up on one translation unit: its matchers and end steps (Migration::onMatch, atEnd).
  void (*registerMatchers)(Migration &);
};

// The rules, in the order they run: a rule runs after the rules producing the facts it consumes.
const std::vector<Rule> &allRules();

// The finalizers, in the order they run (after every selected rule).
const std::vector<Rule> &allFinalizers();

// The rule or finalizer named `name`, or null.
const Rule *findRule(llvm::StringRef name);
bool isFinalizer(const Rule &rule);

// Resolves a --rules value ("all", "default", "a,b", "-c", "+d", "default,-c,+d") against allRules():
// a list that starts with a name selects exactly the names given (`--rules=backward`: that rule
// alone); a list that starts with `+name` or `-name` adds to or removes from the default set
// (`--rules=+x` is `--rules=default,+x`). Returns false with `error` naming an unknown rule (and the
// valid names) or a finalizer (which cannot be selected).
bool selectRules(const std::string &spec, std::vector<const Rule *> &selected, std::string &error);

// What a selection cannot do, for a warning before the run: each selected rule that acts only in
// functions that use the accelerator (it consumes accelerator-users) when no selected rule produces
// that fact finds nothing to act on (`--rules=print-on-main-process` alone). One message per such
// rule, naming the producers to add and the `+name` spelling that adds the rule to the defaults.
std::vector<std::string> selectionWarnings(const std::vector<const Rule *> &selected);

// The selection differs from the defaults by leaving some default rule out: a file on which the
// selected rules do nothing is then checked against the defaults (runRules) and named if they would
// act on it.
bool leavesOutDefaults(const std::vector<const Rule *> &selected);

// What the settings say about the selection of `spec` (selectRules' result, in `selected`): giving
// --fsdp-units enables fsdp-units. Returns false with `error` when they disagree: fsdp-units named in
// `spec` (`fsdp-units`, `+fsdp-units`) without types to act on, or dropped (`-fsdp-units`) while
// types are given.
bool applySettings(const std::string &spec, const RuleSettings &settings, std::vector<const Rule *> &selected,
                   std::string &error);

}  // namespace accmigrate
