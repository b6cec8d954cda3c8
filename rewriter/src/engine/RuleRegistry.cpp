#include "engine/Rule.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <algorithm>

namespace accmigrate {

// Each rule's and finalizer's set-up function, defined in its rules/<Name>.cpp.
#define ACC_RULE(name, summary, enabledByDefault, produces, consumes, setUp) void setUp(Migration &);
#define ACC_FINALIZER(name, summary, produces, consumes, setUp) void setUp(Migration &);
#include "rules/Rules.def"

const char *factName(Fact fact) {
  switch (fact) {
    case AcceleratorUsers: return "accelerator-users";
    case AcceleratorOptions: return "accelerator-options";
    case PreparedModels: return "prepared-models";
    case FilesUsingAcc: return "files-using-acc";
    case RewrittenPrints: return "rewritten-prints";
    case GatheredCounts: return "gathered-counts";
    case ReducedValues: return "reduced-values";
    case HandledWrites: return "handled-writes";
  }
  return "?";
}

// Facts, shortened for rules/Rules.def.
constexpr FactSet kUsers = AcceleratorUsers, kOptions = AcceleratorOptions, kPrepared = PreparedModels,
                  kAcc = FilesUsingAcc, kPrints = RewrittenPrints, kGathered = GatheredCounts,
                  kReduced = ReducedValues, kWrites = HandledWrites, kNone = 0;

// The tables, from rules/Rules.def's lines in their order: the ACC_RULE lines, then the ACC_FINALIZER
// ones (which always run: on by default).
const std::vector<Rule> &allRules() {
  static const std::vector<Rule> rules = {
#define ACC_RULE(name, summary, enabledByDefault, produces, consumes, setUp) \
  {name, summary, enabledByDefault, produces, consumes, setUp},
#define ACC_FINALIZER(...)
#include "rules/Rules.def"
  };
  return rules;
}

const std::vector<Rule> &allFinalizers() {
  static const std::vector<Rule> finalizers = {
#define ACC_RULE(...)
#define ACC_FINALIZER(name, summary, produces, consumes, setUp) {name, summary, true, produces, consumes, setUp},
#include "rules/Rules.def"
  };
  return finalizers;
}

bool isFinalizer(const Rule &rule) {
  const std::vector<Rule> &finalizers = allFinalizers();
  return &rule >= finalizers.data() && &rule < finalizers.data() + finalizers.size();
}

const Rule *findRule(llvm::StringRef name) {
  for (const std::vector<Rule> *list : {&allRules(), &allFinalizers()})
    for (const Rule &rule : *list)
      if (name == rule.name) return &rule;
  return nullptr;
}

// "data-loader, backward, ..., cuda-in-factory (and the sets `default`, `all`)"
static std::string ruleNames() {
  std::string names;
  for (const Rule &rule : allRules()) names += (names.empty() ? "" : ", ") + std::string(rule.name);
  return names + " (and the sets `default`, `all`)";
}

bool selectRules(const std::string &spec, std::vector<const Rule *> &selected, std::string &error) {
  const std::vector<Rule> &rules = allRules();
  std::vector<bool> on(rules.size(), false);
  auto setDefault = [&] {
    for (size_t i = 0; i < on.size(); ++i) on[i] = rules[i].enabledByDefault;
  };
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(spec).split(parts, ',', -1, /*KeepEmpty=*/false);
  // A list that starts by adding or removing rules (`+name`, `-name`) changes the default set; one
  // that starts with a name selects exactly the names given.
  if (parts.empty() || parts.front().trim().startswith("-") || parts.front().trim().startswith("+")) setDefault();
  for (llvm::StringRef part : parts) {
    part = part.trim();
    bool enable = !part.consume_front("-");
    part.consume_front("+");
    if (part == "default") { setDefault(); continue; }
    bool found = false;
    for (size_t i = 0; i < on.size(); ++i)
      if (part == "all" || part == rules[i].name) {
        on[i] = enable;
        found = true;
      }
    if (found) continue;
    const Rule *finalizer = findRule(part);
    if (finalizer && isFinalizer(*finalizer)) {
      error = "'" + part.str() + "' is a finalizer: it always runs, after the rules, and cannot be selected or "
              "turned off; the rules are: " + ruleNames();
      return false;
    }
    error = "unknown rule '" + part.str() + "'; `acc-migrate --list-rules` shows the rules: " + ruleNames();
    return false;
  }
  selected.clear();
  for (size_t i = 0; i < on.size(); ++i)
    if (on[i]) selected.push_back(&rules[i]);
  return true;
}

std::vector<std::string> selectionWarnings(const std::vector<const Rule *> &selected) {
  auto isSelected = [&](const Rule &rule) {
    return std::find(selected.begin(), selected.end(), &rule) != selected.end();
  };
  std::vector<std::string> warnings;
  for (const Rule *rule : selected)
    for (Fact fact : kAllFacts) {
      // Only the fact without which a rule has nothing to act on: it works in the functions that use
      // the accelerator. Other facts it consumes only refine what it does.
      if (!(rule->consumes & fact) || fact != AcceleratorUsers) continue;
      std::string producers;
      bool produced = false;
      for (const Rule &other : allRules()) {
        if (!(other.produces & fact)) continue;
        produced = produced || isSelected(other);
        producers += (producers.empty() ? "" : ", ") + std::string(other.name);
      }
      if (produced) continue;
      warnings.push_back(std::string(rule->name) + " acts only in functions that use the accelerator (the fact " +
                         factName(fact) + "), which no selected rule produces, so it will change nothing; select it "
                         "with a rule that produces it (" + producers + "), or add it to the default rules with "
                         "--rules=+" + rule->name);
      break;  // one message per rule
    }
  return warnings;
}

bool leavesOutDefaults(const std::vector<const Rule *> &selected) {
  for (const Rule &rule : allRules())
    if (rule.enabledByDefault && std::find(selected.begin(), selected.end(), &rule) == selected.end()) return true;
  return false;
}

// How `spec` names `rule` itself (not through `all`/`default`): +1 to add it (`name`, `+name`), -1 to
// drop it (`-name`), 0 not at all; the last mention wins.
static int namesRule(const std::string &spec, llvm::StringRef rule) {
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(spec).split(parts, ',', -1, /*KeepEmpty=*/false);
  int named = 0;
  for (llvm::StringRef part : parts) {
    part = part.trim();
    bool enable = !part.consume_front("-");
    part.consume_front("+");
    if (part == rule) named = enable ? 1 : -1;
  }
  return named;
}

bool applySettings(const std::string &spec, const RuleSettings &settings, std::vector<const Rule *> &selected,
                   std::string &error) {
  const Rule *units = findRule("fsdp-units");
  int named = namesRule(spec, units->name);
  if (settings.fsdpUnits.empty()) {
    if (named > 0) {
      error =
          "the rule fsdp-units needs the module types whose forward FSDP gathers around: name them with "
          "--fsdp-units=TypeA,TypeB (which also enables the rule)";
      return false;
    }
    return true;
  }
  if (named < 0) {
    error = "--fsdp-units enables the rule fsdp-units, which --rules drops (-fsdp-units); give one or the other";
    return false;
  }
  if (std::find(selected.begin(), selected.end(), units) != selected.end()) return true;
  // In the registry's order, like every selection (pointers into allRules(): their order is its order).
  selected.push_back(units);
  std::stable_sort(selected.begin(), selected.end(), [](const Rule *a, const Rule *b) { return a < b; });
  return true;
}

}  // namespace accmigrate
