// The placement of the one accelerator over the summaries of several translation units.
#include "engine/AcceleratorPlacement.h"

#include <gtest/gtest.h>

using namespace accmigrate;

namespace {

PlacedFunction fn(const std::string &usr, bool uses = false) {
  PlacedFunction f;
  f.usr = usr;
  f.name = usr;
  f.file = usr + ".cpp";
  f.usesAccelerator = uses;
  f.isMain = usr == "main";
  return f;
}

std::set<std::string> place(const std::vector<AcceleratorSummary> &units, std::vector<Finding> *findings = nullptr) {
  std::vector<const AcceleratorSummary *> summaries;
  for (const AcceleratorSummary &unit : units) summaries.push_back(&unit);
  std::vector<Finding> local;
  return placeAccelerator(summaries, findings ? *findings : local).decisions;
}

// A header function called from main in a.cpp; b.cpp includes the header and calls nothing.
TEST(AcceleratorPlacement, AHeaderFunctionCalledFromOneUnitTakesAParameterOnly) {
  AcceleratorSummary a, b;
  a.functions = {fn("main"), fn("loop", true)};
  a.calls = {{"main", "loop"}};
  b.functions = {fn("loop", true)};
  std::set<std::string> decisions = place({a, b});
  EXPECT_EQ(decisions, (std::set<std::string>{"local:main", "param:loop", "uses:loop"}));
}

// main.cpp: main -> train; train.cpp: train -> epoch (called every epoch), epoch uses it.
TEST(AcceleratorPlacement, ThreadedThroughEveryFunctionOnThePath) {
  AcceleratorSummary mainUnit, trainUnit;
  mainUnit.functions = {fn("main"), fn("train")};
  mainUnit.calls = {{"main", "train"}};
  trainUnit.functions = {fn("train"), fn("epoch", true)};
  trainUnit.calls = {{"train", "epoch"}};
  std::set<std::string> decisions = place({mainUnit, trainUnit});
  EXPECT_EQ(decisions, (std::set<std::string>{"local:main", "param:train", "param:epoch", "uses:epoch"}));
}

TEST(AcceleratorPlacement, WithoutMainEachUncalledFunctionIsAnEntryPoint) {
  AcceleratorSummary unit;
  unit.functions = {fn("fit", true), fn("tune", true)};
  EXPECT_EQ(place({unit}), (std::set<std::string>{"local:fit", "local:tune", "uses:fit", "uses:tune"}));
}

TEST(AcceleratorPlacement, AnUncalledFunctionBesideMainTakesAParameterAndAFinding) {
  AcceleratorSummary mainUnit, lib;
  mainUnit.functions = {fn("main")};
  lib.functions = {fn("fit", true)};
  std::vector<Finding> findings;
  EXPECT_EQ(place({mainUnit, lib}, &findings), (std::set<std::string>{"param:fit", "uses:fit"}));
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].file, "fit.cpp");
  EXPECT_EQ(findings[0].reason, "`fit` uses the accelerator and no function in the scope calls it");
}

TEST(AcceleratorPlacement, FunctionsThatHaveOneAlreadyAreLeftAlone) {
  AcceleratorSummary unit;
  PlacedFunction train = fn("train", true);
  train.hasAccelerator = true;
  unit.functions = {fn("main"), train};
  unit.calls = {{"main", "train"}};
  EXPECT_EQ(place({unit}), (std::set<std::string>{"uses:train"}));
}

TEST(AcceleratorPlacement, AVirtualFunctionCalledFromOthersDeclaresItsOwnWithAFinding) {
  AcceleratorSummary unit;
  PlacedFunction step = fn("step", true);
  step.isVirtual = true;
  unit.functions = {fn("main"), step};
  unit.calls = {{"main", "step"}};
  std::vector<Finding> findings;
  EXPECT_EQ(place({unit}, &findings), (std::set<std::string>{"local:step", "uses:step"}));
  EXPECT_EQ(findings.size(), 1u);
}

// Only the edits whose decision holds are kept; the kept declaration has the options of the code it reaches.
TEST(AcceleratorPlacement, KeepsTheDecidedEditsWithEveryUnitsOptions) {
  std::vector<UnitResult> units(2);
  for (UnitResult &unit : units) unit.parsed = true;
  units[0].accelerator.functions = {fn("main"), fn("train")};
  units[0].accelerator.calls = {{"main", "train"}};
  Edit local;
  local.text = "\n  acc::Accelerator accelerator;";
  local.onlyIf = {"local:main"};
  Edit notLocal = local;
  notLocal.onlyIf = {"local:train"};
  Edit argument;
  argument.text = "accelerator";
  argument.onlyIf = {"param:train"};
  Edit always;
  always.text = "accelerator.backward(loss)";
  units[0].edits = {local, notLocal, argument};
  units[1].accelerator.functions = {fn("train", true)};
  units[1].accelerator.options = {"step_scheduler_with_optimizer(false)"};
  units[1].edits = {always};
  applyAcceleratorPlacement(units);
  ASSERT_EQ(units[0].edits.size(), 2u);
  EXPECT_EQ(units[0].edits[0].text,
            "\n  acc::Accelerator accelerator(acc::AcceleratorOptions().step_scheduler_with_optimizer(false));");
  EXPECT_EQ(units[0].edits[1].text, "accelerator");
  ASSERT_EQ(units[1].edits.size(), 1u);
}

// Two programs in one scope: the scheduler of one does not change the other's accelerator.
TEST(AcceleratorPlacement, OptionsGoToTheProgramThatNeedsThem) {
  AcceleratorSummary one, two;
  one.functions = {fn("main"), fn("train", true)};
  one.calls = {{"main", "train"}};
  one.options = {"step_scheduler_with_optimizer(false)"};
  PlacedFunction otherMain = fn("main2", true);
  otherMain.isMain = true;
  two.functions = {otherMain};
  std::vector<Finding> findings;
  Placement placement = placeAccelerator({&one, &two}, findings);
  EXPECT_EQ(placement.options["local:main"], (std::set<std::string>{"step_scheduler_with_optimizer(false)"}));
  EXPECT_TRUE(placement.options["local:main2"].empty());
}

}  // namespace
