// The rule registry as data: which rules and finalizers exist, how --rules selects among them, and
// what facts each declares (Rule.h, Facts.h).
#include "engine/Rule.h"

#include <gtest/gtest.h>
#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace accmigrate;

namespace {

std::vector<std::string> names(const std::vector<const Rule *> &rules) {
  std::vector<std::string> out;
  for (const Rule *rule : rules) out.push_back(rule->name);
  return out;
}

std::vector<std::string> select(const std::string &spec) {
  std::vector<const Rule *> selected;
  std::string error;
  EXPECT_TRUE(selectRules(spec, selected, error)) << spec << ": " << error;
  return names(selected);
}

std::string selectError(const std::string &spec) {
  std::vector<const Rule *> selected;
  std::string error;
  EXPECT_FALSE(selectRules(spec, selected, error)) << spec;
  return error;
}

std::vector<std::string> defaultRules() {
  std::vector<std::string> out;
  for (const Rule &rule : allRules())
    if (rule.enabledByDefault) out.push_back(rule.name);
  return out;
}

// Rules, then finalizers: the order a unit runs them in.
std::vector<const Rule *> runOrder() {
  std::vector<const Rule *> order;
  for (const Rule &rule : allRules()) order.push_back(&rule);
  for (const Rule &finalizer : allFinalizers()) order.push_back(&finalizer);
  return order;
}

TEST(RuleRegistry, ListsEachRuleOnceWithAnExplanationAndASetUp) {
  std::set<std::string> seen;
  for (const Rule *rule : runOrder()) {
    std::string name = rule->name;
    EXPECT_TRUE(seen.insert(name).second) << name << " is listed twice";
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz-"), std::string::npos) << name;
    EXPECT_GT(std::string(rule->summary).size(), 10u) << name;
    EXPECT_NE(rule->registerMatchers, nullptr) << name;
    EXPECT_EQ(findRule(name), rule) << name;
  }
  EXPECT_EQ(findRule("nope"), nullptr);
  EXPECT_EQ(allRules().size(), 23u);  // a new rule: a line here, a lit test, a row in docs/migrate.md
}

TEST(RuleRegistry, FinalizersAreAlwaysPresentAndCannotBeSelected) {
  EXPECT_EQ(names({&allFinalizers()[0], &allFinalizers()[1], &allFinalizers()[2]}),
            (std::vector<std::string>{"create-accelerator", "include-acc", "cmake-link"}));
  EXPECT_EQ(allFinalizers().size(), 3u);
  for (const Rule &finalizer : allFinalizers()) {
    EXPECT_TRUE(isFinalizer(finalizer));
    for (std::string spec : {std::string(finalizer.name), "-" + std::string(finalizer.name),
                             "default,+" + std::string(finalizer.name)})
      EXPECT_NE(selectError(spec).find("is a finalizer: it always runs"), std::string::npos) << spec;
  }
  for (const Rule &rule : allRules()) EXPECT_FALSE(isFinalizer(rule)) << rule.name;
  // No selection holds a finalizer: they run whatever --rules says.
  for (std::string spec : {"", "default", "all", "backward", "-backward"})
    for (const std::string &name : select(spec))
      EXPECT_FALSE(isFinalizer(*findRule(name))) << spec << " selected " << name;
}

TEST(RuleRegistry, SelectsTheDefaultsAllOrRulesAlone) {
  EXPECT_EQ(select(""), defaultRules());
  EXPECT_EQ(select("default"), defaultRules());
  EXPECT_EQ(select("all").size(), allRules().size());
  // fsdp-units (which needs --fsdp-units) is the one rule off by default: what a migrated program
  // prints, counts and writes is right by default.
  std::vector<std::string> defaults = defaultRules();
  for (const char *on : {"print-on-main-process", "gather-for-metrics", "reduce-metrics", "gradient-accumulation"})
    EXPECT_EQ(std::count(defaults.begin(), defaults.end(), on), 1) << on;
  EXPECT_EQ(std::count(defaults.begin(), defaults.end(), "fsdp-units"), 0);
  EXPECT_EQ(defaults.size(), allRules().size() - 1);
  // A list that starts with a name: those rules alone, in the registry's order.
  EXPECT_EQ(select("backward"), std::vector<std::string>{"backward"});
  EXPECT_EQ(select("device-move,prepare"), (std::vector<std::string>{"prepare", "device-move"}));
}

TEST(RuleRegistry, TogglesRulesOnAndOff) {
  std::vector<std::string> withoutMove = defaultRules();
  withoutMove.erase(std::find(withoutMove.begin(), withoutMove.end(), "device-move"));
  EXPECT_EQ(select("-device-move"), withoutMove);
  EXPECT_EQ(select("default,-device-move"), withoutMove);
  // `+name` first adds to the defaults, as `-name` first drops from them (not: that rule alone).
  std::vector<std::string> withUnits = select("+fsdp-units");
  EXPECT_EQ(withUnits.size(), defaultRules().size() + 1);
  EXPECT_EQ(std::count(withUnits.begin(), withUnits.end(), "fsdp-units"), 1);
  EXPECT_EQ(select("default,+fsdp-units"), withUnits);
  EXPECT_EQ(select(" +fsdp-units"), withUnits);
  EXPECT_EQ(select("+backward"), defaultRules());
  EXPECT_EQ(select("-device-move,+device-move"), defaultRules());
  EXPECT_EQ(select("all,-fsdp-units"), defaultRules());
  EXPECT_EQ(select("backward,-backward"), std::vector<std::string>{});
  EXPECT_EQ(select("backward,+clip-grad"), (std::vector<std::string>{"backward", "clip-grad"}));
}

TEST(RuleRegistry, AnUnknownNameIsAnErrorThatListsTheValidOnes) {
  for (std::string spec : {"nope", "default,-nope", "backward,+nope"}) {
    std::string error = selectError(spec);
    EXPECT_NE(error.find("unknown rule 'nope'"), std::string::npos) << error;
    for (const Rule &rule : allRules()) EXPECT_NE(error.find(rule.name), std::string::npos) << rule.name;
    EXPECT_NE(error.find("`default`, `all`"), std::string::npos) << error;
  }
}

// --fsdp-units enables fsdp-units whatever --rules selects; naming the rule without types, or
// dropping it with types, is an error; `all` selects it with nothing to do.
TEST(RuleRegistry, FsdpUnitsFollowsItsTypes) {
  auto apply = [](const std::string &spec, std::vector<std::string> types, std::string *error = nullptr) {
    std::vector<const Rule *> selected;
    std::string message;
    EXPECT_TRUE(selectRules(spec, selected, message)) << spec << ": " << message;
    RuleSettings settings;
    settings.fsdpUnits = std::move(types);
    bool ok = applySettings(spec, settings, selected, message);
    if (error) *error = ok ? "" : message;
    else EXPECT_TRUE(ok) << spec << ": " << message;
    return names(selected);
  };
  EXPECT_EQ(apply("", {}), defaultRules());
  std::vector<std::string> withUnits = apply("", {"Block"});
  EXPECT_EQ(withUnits.size(), defaultRules().size() + 1);
  EXPECT_EQ(std::count(withUnits.begin(), withUnits.end(), "fsdp-units"), 1);
  // In the registry's order: right after gather-for-metrics when both are on.
  EXPECT_EQ(apply("backward,gather-for-metrics", {"Block"}),
            (std::vector<std::string>{"backward", "gather-for-metrics", "fsdp-units"}));
  EXPECT_EQ(apply("fsdp-units", {"Block"}), std::vector<std::string>{"fsdp-units"});
  EXPECT_EQ(apply("default,+fsdp-units", {"Block", "Head"}), withUnits);
  EXPECT_EQ(apply("all", {}).size(), allRules().size());
  for (std::string spec : {"fsdp-units", "+fsdp-units", "default,+fsdp-units", "-fsdp-units,+fsdp-units"}) {
    std::string error;
    apply(spec, {}, &error);
    EXPECT_NE(error.find("needs the module types"), std::string::npos) << spec << ": " << error;
    EXPECT_NE(error.find("--fsdp-units=TypeA,TypeB"), std::string::npos) << spec << ": " << error;
  }
  std::string error;
  apply("default,-fsdp-units", {"Block"}, &error);
  EXPECT_NE(error.find("which --rules drops"), std::string::npos) << error;
  // The last mention wins, as in selectRules.
  EXPECT_EQ(apply("default,+fsdp-units,-fsdp-units", {}), defaultRules());
}

TEST(RuleRegistry, FactNamesAreStable) {
  EXPECT_STREQ(factName(AcceleratorUsers), "accelerator-users");
  EXPECT_STREQ(factName(AcceleratorOptions), "accelerator-options");
  EXPECT_STREQ(factName(PreparedModels), "prepared-models");
  EXPECT_STREQ(factName(FilesUsingAcc), "files-using-acc");
  EXPECT_STREQ(factName(RewrittenPrints), "rewritten-prints");
  EXPECT_STREQ(factName(GatheredCounts), "gathered-counts");
  EXPECT_STREQ(factName(ReducedValues), "reduced-values");
  EXPECT_STREQ(factName(HandledWrites), "handled-writes");
}

// A rule that acts only in functions that use the accelerator, selected without any rule that says
// which those are, is named before the run with the producers and the `+name` spelling; the
// defaults, and a rule with its producers, are not.
TEST(RuleRegistry, ASelectionThatCannotActIsNamed) {
  auto warnings = [](const std::string &spec) {
    std::vector<const Rule *> selected;
    std::string error;
    EXPECT_TRUE(selectRules(spec, selected, error)) << spec << ": " << error;
    return selectionWarnings(selected);
  };
  std::vector<std::string> lonely = warnings("print-on-main-process");
  ASSERT_EQ(lonely.size(), 1u);
  EXPECT_NE(lonely[0].find("print-on-main-process acts only in functions that use the accelerator"), std::string::npos)
      << lonely[0];
  EXPECT_NE(lonely[0].find("(data-loader, backward,"), std::string::npos) << lonely[0];
  EXPECT_NE(lonely[0].find("--rules=+print-on-main-process"), std::string::npos) << lonely[0];
  EXPECT_EQ(warnings("print-on-every-process,every-rank-side-effect").size(), 2u);
  for (std::string spec : {"", "default", "all", "backward,print-on-main-process", "reduce-metrics", "device-move"})
    EXPECT_TRUE(warnings(spec).empty()) << spec;
  // A selection that leaves out a default rule is checked against the defaults file by file.
  std::vector<const Rule *> selected;
  std::string error;
  for (std::string spec : {"", "default", "all", "+fsdp-units"}) {
    ASSERT_TRUE(selectRules(spec, selected, error));
    EXPECT_FALSE(leavesOutDefaults(selected)) << spec;
  }
  for (std::string spec : {"backward", "-device-move"}) {
    ASSERT_TRUE(selectRules(spec, selected, error));
    EXPECT_TRUE(leavesOutDefaults(selected)) << spec;
  }
}

// Every rule declares its facts, and they connect: whatever a rule or finalizer consumes, something
// earlier produces and nothing later does (a later producer's writes would come too late); whatever
// is produced, something consumes.
TEST(RuleRegistry, EachRuleDeclaresFactsThatConnect) {
  std::vector<const Rule *> order = runOrder();
  for (size_t i = 0; i < order.size(); ++i)
    for (Fact fact : kAllFacts) {
      if (!(order[i]->consumes & fact)) continue;
      bool earlier = std::any_of(order.begin(), order.begin() + i, [&](const Rule *r) { return r->produces & fact; });
      bool later = std::any_of(order.begin() + i + 1, order.end(), [&](const Rule *r) { return r->produces & fact; });
      EXPECT_TRUE(earlier) << order[i]->name << " consumes " << factName(fact) << " that nothing before it produces";
      EXPECT_FALSE(later) << order[i]->name << " consumes " << factName(fact) << " that a later step produces";
      EXPECT_FALSE(order[i]->produces & fact) << order[i]->name << " both produces and consumes " << factName(fact);
    }
  for (Fact fact : kAllFacts) {
    bool consumed = std::any_of(order.begin(), order.end(), [&](const Rule *r) { return r->consumes & fact; });
    EXPECT_TRUE(consumed) << factName(fact) << " is produced for nobody";
  }
  // The finalizers consume what the rules learn; every rule that writes the acc API says so.
  EXPECT_EQ(findRule("create-accelerator")->consumes, FactSet(AcceleratorUsers | AcceleratorOptions));
  EXPECT_EQ(findRule("include-acc")->consumes, FactSet(FilesUsingAcc));
  EXPECT_EQ(findRule("cmake-link")->consumes, FactSet(FilesUsingAcc));
  for (const char *writer : {"data-loader", "backward", "clip-grad", "device-declaration", "prepare", "device-move",
                             "save-on-main-process", "write-on-main-process", "gather-for-metrics", "reduce-metrics"})
    EXPECT_EQ(findRule(writer)->produces & (AcceleratorUsers | FilesUsingAcc), FactSet(AcceleratorUsers | FilesUsingAcc))
        << writer;
  // Reports only: no facts either way.
  for (const char *report : {"no-data-loader", "view-batch-size", "static-cuda", "cuda-in-factory"}) {
    EXPECT_EQ(findRule(report)->produces, 0u) << report;
    EXPECT_EQ(findRule(report)->consumes, 0u) << report;
  }
  // A report that leaves out the counts gather-for-metrics rewrote and notes those reduce-metrics reduced.
  EXPECT_EQ(findRule("dataset-size-division")->produces, 0u);
  EXPECT_EQ(findRule("dataset-size-division")->consumes, FactSet(GatheredCounts | ReducedValues));
  // reduce-metrics leaves the gathered counts alone; what it reduces, the printing rule prints as it is.
  EXPECT_EQ(findRule("reduce-metrics")->consumes, FactSet(GatheredCounts));
  EXPECT_TRUE(findRule("reduce-metrics")->produces & ReducedValues);
  EXPECT_TRUE(findRule("print-on-main-process")->consumes & ReducedValues);
  // A report on the functions that use the accelerator.
  EXPECT_EQ(findRule("every-rank-side-effect")->produces, 0u);
  EXPECT_EQ(findRule("every-rank-side-effect")->consumes, FactSet(AcceleratorUsers | HandledWrites));
  EXPECT_EQ(findRule("write-on-main-process")->produces & HandledWrites, FactSet(HandledWrites));
  // A prepared model's save becomes accelerator.save_model; a save under a metric reduce-metrics or
  // gather-for-metrics made uniform gets its barriers (so may a directory created under one).
  EXPECT_EQ(findRule("save-on-main-process")->consumes, FactSet(PreparedModels | GatheredCounts | ReducedValues));
  EXPECT_EQ(findRule("write-on-main-process")->consumes, FactSet(GatheredCounts | ReducedValues));
}

}  // namespace
