// A rule is data: a name (for --rules and reports), a one-line explanation (for --list-rules), and
// the function that applies it to one translation unit. Each lives in rules/<name>.cpp and has its
// own lit test, rewriter/test/<name>.cpp.
#pragma once
#include <string>
#include <vector>

namespace accmigrate {

class Migration;

struct Rule {
  const char *name;
  const char *summary;
  bool enabledByDefault;
  void (*apply)(Migration &);
};

// Every rule, in the order they run: rules that write `accelerator.` first, then the ones that
// create the accelerator, prepare the objects and include the header, which depend on them.
const std::vector<Rule> &allRules();

// Resolves a --rules value ("all", "default", "a,b", "-c", "default,-c,+d") against allRules().
// Returns false with `error` naming the unknown rule.
bool selectRules(const std::string &spec, std::vector<const Rule *> &selected, std::string &error);

}  // namespace accmigrate
