#include "engine/Migration.h"

#include "analysis/Analysis.h"
#include "analysis/RankDependence.h"
#include "engine/EditText.h"
#include "engine/Rule.h"

#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/Path.h>
#include <algorithm>
#include <utility>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {

bool ProjectScope::contains(StringRef path) const {
  for (const std::string &root : roots_) {
    if (path == root) return true;
    if (path.startswith(root) && path.size() > root.size() &&
        llvm::sys::path::is_separator(path[root.size()]))
      return true;
  }
  return false;
}

std::string absoluteInUnit(const SourceManager &sm, StringRef name) {
  SmallString<256> path(name);
  sm.getFileManager().getVirtualFileSystem().makeAbsolute(path);
  llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
  return std::string(path);
}

bool ProjectFiles::contains(SourceLocation loc) const {
  if (loc.isInvalid()) return false;
  loc = sm_.getSpellingLoc(loc);
  if (sm_.isInSystemHeader(loc)) return false;
  FileID id = sm_.getFileID(loc);
  auto cached = cache_.find(id);
  if (cached != cache_.end()) return cached->second;
  bool result = false;
  if (OptionalFileEntryRef entry = sm_.getFileEntryRefForID(id)) result = scope_.contains(absoluteInUnit(sm_, entry->getName()));
  cache_[id] = result;
  return result;
}

// One registration of a rule's matcher: runs the rule's callback as that rule.
class Migration::Callback : public MatchFinder::MatchCallback {
 public:
  Callback(Migration &m, const Rule *rule, OnMatch onMatch) : m_(m), rule_(rule), onMatch_(std::move(onMatch)) {}
  void run(const MatchFinder::MatchResult &result) override {
    m_.rule_ = rule_;
    onMatch_(result.Nodes);
    m_.rule_ = nullptr;
  }
  StringRef getID() const override { return rule_->name; }  // MatchFinder's per-callback profile

 private:
  Migration &m_;
  const Rule *rule_;
  OnMatch onMatch_;
};

Migration::Migration(ASTContext &ctx, const ProjectScope &scope, UnitResult &out, RuleSettings settings)
    : ctx(ctx),
      sm(ctx.getSourceManager()),
      lang(ctx.getLangOpts()),
      settings(std::move(settings)),
      project_(sm, scope),
      out_(out) {
  // Only the declarations this file itself parsed (noload_decls: those a PCH holds stay on disk), and
  // of those only the project's. The parent map that rules walk up is built over these alone:
  // building it over the whole TU would load and traverse all of torch.
  for (Decl *d : ctx.getTranslationUnitDecl()->noload_decls())
    if (inProject(d->getLocation())) projectDecls_.push_back(d);
  ctx.setTraversalScope(projectDecls_);
}

Migration::~Migration() = default;

void Migration::onMatch(const StatementMatcher &matcher, OnMatch onMatch) {
  callbacks_.push_back(std::make_unique<Callback>(*this, rule_, std::move(onMatch)));
  finder_.addMatcher(matcher, callbacks_.back().get());
}

void Migration::onMatch(const DeclarationMatcher &matcher, OnMatch onMatch) {
  callbacks_.push_back(std::make_unique<Callback>(*this, rule_, std::move(onMatch)));
  finder_.addMatcher(matcher, callbacks_.back().get());
}

void Migration::atEnd(std::function<void()> step) { endSteps_.emplace_back(rule_, std::move(step)); }

void Migration::run(const std::vector<const Rule *> &steps) {
  for (const Rule *rule : steps) {
    rule_ = rule;
    rule->registerMatchers(*this);
  }
  rule_ = nullptr;
  // The one traversal: every rule's matchers, over the project's declarations only (the traversal
  // scope), template instantiations included.
  traversing_ = true;
  finder_.matchAST(ctx);
  traversing_ = false;
  for (auto &[rule, step] : endSteps_) {
    rule_ = rule;
    step();
    if (rule->consumes & FilesUsingAcc) {
      // Each file that uses acc only if a placement decision holds, alone, under those decisions.
      std::set<FileID> unconditional = facts_.filesUsingAcc;
      for (auto &[file, decisions] : filesUsingAccIf_) {
        if (unconditional.count(file)) continue;
        facts_.filesUsingAcc = {file};
        onlyIf(std::vector<std::string>(decisions.begin(), decisions.end()), step);
      }
      facts_.filesUsingAcc = unconditional;
    }
  }
  rule_ = nullptr;
  exportUniformResults();
  // Edits in rule order, each rule's in the order it made them: insertions at one offset are joined
  // in this order (Output.cpp), as when every rule ran by itself.
  std::map<std::string, size_t> order;
  for (size_t i = 0; i < steps.size(); ++i) order.emplace(steps[i]->name, i);
  std::stable_sort(out_.edits.begin(), out_.edits.end(),
                   [&](const Edit &a, const Edit &b) { return order[a.rule] < order[b.rule]; });
}

bool Migration::replace(CharSourceRange range, StringRef text) {
  SourceLocation begin = range.getBegin(), end = range.getEnd();
  if (begin.isMacroID() || end.isMacroID()) {
    report(begin, "inside a macro expansion, which acc-migrate never edits",
           text.empty() ? Twine("remove it by hand") : "change it by hand to `" + text + "`");
    return false;
  }
  if (!inProject(begin)) return false;
  if (range.isTokenRange()) end = afterToken(end, sm, lang);
  Edit edit;
  edit.file = absoluteInUnit(sm, sm.getFileEntryRefForID(sm.getFileID(begin))->getName());
  edit.offset = sm.getFileOffset(begin);
  edit.length = sm.getFileOffset(end) - edit.offset;
  edit.text = text.str();
  edit.rule = rule_ ? rule_->name : "";
  edit.line = sm.getSpellingLineNumber(begin);
  edit.column = sm.getSpellingColumnNumber(begin);
  edit.onlyIf = onlyIf_;
  out_.edits.push_back(std::move(edit));
  if (text.contains("accelerator") || text.contains("acc::")) noteUsesAcc(begin);
  return true;
}

bool Migration::insert(SourceLocation at, StringRef text) {
  return replace(CharSourceRange::getCharRange(at, at), text);
}

void Migration::report(SourceLocation loc, const Twine &reason, const Twine &suggestion,
                       Finding::Level level) {
  loc = sm.getExpansionLoc(loc);  // for a macro, where the user wrote it
  Finding f;
  if (OptionalFileEntryRef entry = sm.getFileEntryRefForID(sm.getFileID(loc)))
    f.file = absoluteInUnit(sm, entry->getName());
  f.line = sm.getSpellingLineNumber(loc);
  f.column = sm.getSpellingColumnNumber(loc);
  f.rule = rule_ ? rule_->name : "";
  f.reason = reason.str();
  f.suggestion = suggestion.str();
  f.level = level;
  f.onlyIf = onlyIf_;
  out_.findings.push_back(std::move(f));
}

void Migration::editFile(Edit edit) {
  edit.rule = rule_ ? rule_->name : "";
  edit.onlyIf = onlyIf_;  // a build edit for a file that uses acc only under a placement decision
  out_.edits.push_back(std::move(edit));
}

void Migration::reportInFile(Finding finding) {
  finding.rule = rule_ ? rule_->name : "";
  finding.onlyIf = onlyIf_;
  out_.findings.push_back(std::move(finding));
}

void Migration::onlyIf(std::vector<std::string> decisions, const std::function<void()> &make) {
  std::vector<std::string> outer = std::exchange(onlyIf_, std::move(decisions));
  make();
  onlyIf_ = std::move(outer);
}

std::string Migration::text(SourceRange range) const { return sourceText(range, sm, lang); }

const FunctionDecl *Migration::asWrittenFunction(const FunctionDecl *fn) {
  if (!fn) return nullptr;
  if (const FunctionDecl *pattern = fn->getTemplateInstantiationPattern()) fn = pattern;
  return fn;
}

const FunctionDecl *Migration::enclosingFunction(const Stmt &node) { return accmigrate::enclosingFunction(node, ctx); }

void Migration::access(Fact fact, bool write) {
  if (!rule_ || !((write ? rule_->produces : rule_->consumes) & fact))
    llvm::report_fatal_error(llvm::Twine("acc-migrate: rule '") + (rule_ ? rule_->name : "(none)") + "' " +
                                 (write ? "writes" : "reads") + " the fact '" + factName(fact) +
                                 "' without declaring it (Rule::" + (write ? "produces" : "consumes") +
                                 " in rules/Rules.def)",
                             /*gen_crash_diag=*/false);
  // During the traversal a fact holds only what the matches so far found.
  if (!write && traversing_)
    llvm::report_fatal_error(llvm::Twine("acc-migrate: rule '") + rule_->name + "' reads the fact '" +
                                 factName(fact) + "' while matching; read facts in an end step (Migration::atEnd)",
                             /*gen_crash_diag=*/false);
}

void Migration::useAccelerator(const FunctionDecl *fn) {
  access(AcceleratorUsers, /*write=*/true);
  fn = asWrittenFunction(fn);
  std::vector<const FunctionDecl *> &users = facts_.acceleratorUsers;
  if (fn && std::find(users.begin(), users.end(), fn) == users.end()) users.push_back(fn);
}

const std::vector<const FunctionDecl *> &Migration::acceleratorUsers() {
  access(AcceleratorUsers, /*write=*/false);
  return facts_.acceleratorUsers;
}

bool Migration::usesAccelerator(const FunctionDecl *fn) {
  const std::vector<const FunctionDecl *> &users = acceleratorUsers();
  return fn && std::find(users.begin(), users.end(), fn) != users.end();
}

void Migration::addAcceleratorOption(StringRef setter) {
  access(AcceleratorOptions, /*write=*/true);
  facts_.acceleratorOptions.insert(setter.str());
}

const std::set<std::string> &Migration::acceleratorOptions() {
  access(AcceleratorOptions, /*write=*/false);
  return facts_.acceleratorOptions;
}

void Migration::notePrepared(const VarDecl *model) {
  access(PreparedModels, /*write=*/true);
  facts_.preparedModels.insert(model);
}

bool Migration::isPrepared(const VarDecl *model) {
  access(PreparedModels, /*write=*/false);
  return facts_.preparedModels.count(model) > 0;
}

void Migration::noteUsesAcc(SourceLocation loc) {
  access(FilesUsingAcc, /*write=*/true);
  FileID file = sm.getFileID(sm.getFileLoc(loc));
  if (onlyIf_.empty()) facts_.filesUsingAcc.insert(file);
  else filesUsingAccIf_[file].insert(onlyIf_.begin(), onlyIf_.end());
}

const std::set<FileID> &Migration::filesUsingAcc() {
  access(FilesUsingAcc, /*write=*/false);
  return facts_.filesUsingAcc;
}

void Migration::noteRewrittenPrint(SourceLocation statement) {
  access(RewrittenPrints, /*write=*/true);
  facts_.rewrittenPrints.insert(statement);
}

bool Migration::isRewrittenPrint(SourceLocation statement) {
  access(RewrittenPrints, /*write=*/false);
  return facts_.rewrittenPrints.count(statement) > 0;
}

void Migration::noteGatheredCount(const VarDecl *count, SourceLocation increment) {
  access(GatheredCounts, /*write=*/true);
  facts_.gatheredCounts.insert(count->getLocation());
  facts_.gatheredVars.emplace_back(count, increment);
}

RankDependence Migration::rankDependence() {
  return RankDependence(ctx, OtherFiles{&settings.uniformResultsElsewhere, &out_.resultsNotSeen});
}

namespace {
class Definitions : public RecursiveASTVisitor<Definitions> {
 public:
  std::vector<const FunctionDecl *> found;
  bool VisitFunctionDecl(FunctionDecl *fn) {
    if (fn->isThisDeclarationADefinition()) found.push_back(fn);
    return true;
  }
};
}  // namespace

// After every rule: the collectives they inserted (gathered counts, reduced values) count.
void Migration::exportUniformResults() {
  RankDependence ranks = rankDependence();
  for (auto [count, increment] : facts_.gatheredVars) ranks.assumeUniformAfter(count, increment);
  for (auto [var, point] : facts_.reducedValues) ranks.assumeUniformAfter(var, point);
  Definitions definitions;
  for (Decl *d : projectDecls_) definitions.TraverseDecl(d);
  for (const FunctionDecl *fn : definitions.found) {
    std::string key = RankDependence::crossFileKey(fn);
    if (!key.empty() && inProject(fn->getLocation()) && ranks.returnsUniformWhateverArguments(fn))
      out_.uniformResults.insert(key);
  }
}

void Migration::assumeUniformValues(RankDependence &ranks) {
  if (rule_ && (rule_->consumes & GatheredCounts)) {
    access(GatheredCounts, /*write=*/false);
    for (auto [count, increment] : facts_.gatheredVars) ranks.assumeUniformAfter(count, increment);
  }
  if (rule_ && (rule_->consumes & ReducedValues))
    for (auto [var, point] : reducedValues()) ranks.assumeUniformAfter(var, point);
}

bool Migration::isGatheredCount(const VarDecl *count) {
  access(GatheredCounts, /*write=*/false);
  return facts_.gatheredCounts.count(count->getLocation()) > 0;
}

void Migration::noteHandledWrite(SourceLocation write) {
  access(HandledWrites, /*write=*/true);
  facts_.handledWrites.insert(write);
}

bool Migration::isHandledWrite(SourceLocation write) {
  access(HandledWrites, /*write=*/false);
  return facts_.handledWrites.count(write) > 0;
}

void Migration::noteReduced(const VarDecl *var, SourceLocation point) {
  access(ReducedValues, /*write=*/true);
  facts_.reducedValues.emplace_back(var, point);
}

const std::vector<std::pair<const VarDecl *, SourceLocation>> &Migration::reducedValues() {
  access(ReducedValues, /*write=*/false);
  return facts_.reducedValues;
}

// Some rule (not a finalizer) edited or reported something in the unit.
static bool actedByRules(const UnitResult &out) {
  auto byRule = [](const std::string &name) {
    const Rule *rule = findRule(name);
    return rule && !isFinalizer(*rule);
  };
  return std::any_of(out.edits.begin(), out.edits.end(), [&](const Edit &e) { return byRule(e.rule); }) ||
         std::any_of(out.findings.begin(), out.findings.end(), [&](const Finding &f) { return byRule(f.rule); });
}

void runRules(ASTContext &ctx, const ProjectScope &scope, const std::vector<const Rule *> &rules,
              UnitResult &out, const RuleSettings &settings) {
  {
    Migration migration(ctx, scope, out, settings);
    std::vector<const Rule *> steps = rules;
    for (const Rule &finalizer : allFinalizers()) steps.push_back(&finalizer);
    migration.run(steps);
  }
  // A selection without some default rule that does nothing here: would the defaults act? (The unit
  // is parsed already; matching it again costs a traversal.) Their edits are only counted.
  if (!leavesOutDefaults(rules) || actedByRules(out)) return;
  std::vector<const Rule *> defaults;
  for (const Rule &rule : allRules())
    if (rule.enabledByDefault) defaults.push_back(&rule);
  UnitResult scratch;
  scratch.mainFile = out.mainFile;
  Migration migration(ctx, scope, scratch, settings);
  migration.run(defaults);
  for (const Edit &edit : scratch.edits) out.leftOut.rules.insert(edit.rule);
  for (const Finding &finding : scratch.findings) out.leftOut.rules.insert(finding.rule);
  out.leftOut.edits = scratch.edits.size();
  out.leftOut.findings = scratch.findings.size();
}

}  // namespace accmigrate
