#include "engine/AcceleratorPlacement.h"

#include <algorithm>
#include <map>

namespace accmigrate {

std::string acceleratorDeclaration(const std::set<std::string> &options) {
  if (options.empty()) return "acc::Accelerator accelerator;";
  std::string setters;
  for (const std::string &setter : options) setters += "." + setter;
  return "acc::Accelerator accelerator(acc::AcceleratorOptions()" + setters + ");";
}

Placement placeAccelerator(const std::vector<const AcceleratorSummary *> &summaries, std::vector<Finding> &findings) {
  struct Node {
    PlacedFunction function;
    std::set<std::string> callers, callees;
    std::set<std::string> options;  // of the units where it uses the accelerator
  };
  std::map<std::string, Node> nodes;
  std::vector<std::string> order;  // first seen: findings and decisions do not depend on map order
  bool hasMain = false;
  for (const AcceleratorSummary *summary : summaries) {
    for (const PlacedFunction &fn : summary->functions) {
      auto [it, added] = nodes.try_emplace(fn.usr, Node{fn, {}});
      PlacedFunction &merged = it->second.function;
      if (merged.usr.empty()) merged = fn;  // seen before only as the end of a call
      if (added) order.push_back(fn.usr);
      merged.usesAccelerator |= fn.usesAccelerator;
      if (fn.usesAccelerator) it->second.options.insert(summary->options.begin(), summary->options.end());
      merged.hasAccelerator |= fn.hasAccelerator;
      hasMain |= fn.isMain;
    }
    for (const auto &[caller, callee] : summary->calls)
      if (caller != callee) nodes[callee].callers.insert(caller), nodes[caller].callees.insert(callee);
  }

  Placement placement;
  std::set<std::string> &decisions = placement.decisions, visited;
  std::vector<std::string> pending;
  for (const std::string &usr : order)
    if (nodes[usr].function.usesAccelerator) {
      pending.push_back(usr);
      decisions.insert("uses:" + usr);  // for findings about code no unit migrated
    }
  for (size_t i = 0; i < pending.size(); ++i) {
    const std::string usr = pending[i];
    if (!visited.insert(usr).second) continue;
    const Node &node = nodes[usr];
    const PlacedFunction &fn = node.function;
    if (fn.usr.empty() || fn.hasAccelerator) continue;  // empty: only seen in a call, never summarised
    auto report = [&](const std::string &reason, const std::string &suggestion) {
      findings.push_back(
          {fn.file, fn.line, fn.column, "create-accelerator", reason, suggestion, Finding::Level::Warning});
    };
    if (fn.isMain || (node.callers.empty() && !hasMain)) {
      decisions.insert("local:" + usr);
    } else if (fn.isVirtual) {
      decisions.insert("local:" + usr);
      report("virtual `" + fn.name + "` uses the accelerator and is called from other functions",
             "give its class an `acc::Accelerator&` member set at construction");
    } else {
      decisions.insert("param:" + usr);
      if (node.callers.empty())
        report("`" + fn.name + "` uses the accelerator and no function in the scope calls it",
               "its caller must pass the program's one `acc::Accelerator` as the new first argument (or widen the "
               "scope to the code that calls it)");
      for (const std::string &caller : node.callers) pending.push_back(caller);
    }
  }
  // Each declaration: the options of everything it reaches.
  for (const std::string &decision : decisions) {
    if (decision.rfind("local:", 0) != 0) continue;
    std::set<std::string> &options = placement.options[decision];
    std::vector<std::string> reach = {decision.substr(6)};
    std::set<std::string> seen(reach.begin(), reach.end());
    for (size_t i = 0; i < reach.size(); ++i) {
      const Node &node = nodes[reach[i]];
      options.insert(node.options.begin(), node.options.end());
      for (const std::string &callee : node.callees)
        if (seen.insert(callee).second) reach.push_back(callee);
    }
  }
  return placement;
}

namespace {

// `!d`: d does not hold.
bool holds(const std::string &decision, const std::set<std::string> &decisions) {
  if (!decision.empty() && decision[0] == '!') return decisions.count(decision.substr(1)) == 0;
  return decisions.count(decision) > 0;
}

template <typename T>
void keepDecided(std::vector<T> &items, const std::set<std::string> &decisions) {
  items.erase(std::remove_if(items.begin(), items.end(),
                             [&](const T &item) {
                               return !item.onlyIf.empty() &&
                                      std::none_of(item.onlyIf.begin(), item.onlyIf.end(),
                                                   [&](const std::string &d) { return holds(d, decisions); });
                             }),
              items.end());
}

}  // namespace

void applyAcceleratorPlacement(std::vector<UnitResult> &units) {
  std::vector<const AcceleratorSummary *> summaries;
  for (const UnitResult &unit : units)
    if (unit.parsed) summaries.push_back(&unit.accelerator);
  std::vector<Finding> findings;
  Placement placement = placeAccelerator(summaries, findings);
  bool reported = false;
  for (UnitResult &unit : units) {
    if (!unit.parsed) continue;
    keepDecided(unit.edits, placement.decisions);
    keepDecided(unit.findings, placement.decisions);
    // A kept declaration (create-accelerator wrote it with its own unit's options) gets its program's.
    for (Edit &edit : unit.edits) {
      size_t at = edit.text.find("acc::Accelerator accelerator");
      for (const std::string &decision : edit.onlyIf) {
        auto options = placement.options.find(decision);
        if (at != std::string::npos && options != placement.options.end())
          edit.text = edit.text.substr(0, at) + acceleratorDeclaration(options->second);
      }
    }
    if (!reported) unit.findings.insert(unit.findings.end(), findings.begin(), findings.end());
    reported = true;
  }
}

}  // namespace accmigrate
