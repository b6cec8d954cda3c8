#include "Migration.h"

#include "EditText.h"
#include "Rule.h"

#include <clang/AST/ParentMapContext.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/Path.h>

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

bool ProjectFiles::contains(SourceLocation loc) const {
  if (loc.isInvalid()) return false;
  loc = sm_.getSpellingLoc(loc);
  if (sm_.isInSystemHeader(loc)) return false;
  FileID id = sm_.getFileID(loc);
  auto cached = cache_.find(id);
  if (cached != cache_.end()) return cached->second;
  bool result = false;
  if (OptionalFileEntryRef entry = sm_.getFileEntryRefForID(id)) {
    SmallString<256> path(entry->getName());
    llvm::sys::fs::make_absolute(path);
    llvm::sys::path::remove_dots(path, /*remove_dot_dot=*/true);
    result = scope_.contains(path);
  }
  cache_[id] = result;
  return result;
}

Migration::Migration(ASTContext &ctx, const ProjectScope &scope, UnitResult &out)
    : ctx(ctx), sm(ctx.getSourceManager()), lang(ctx.getLangOpts()), project_(sm, scope), out_(out) {
  // Only the declarations this file itself parsed (noload_decls: those a PCH holds stay on disk), and
  // of those only the project's. The parent map that rules walk up is built over these alone:
  // building it over the whole TU would load and traverse all of torch.
  for (Decl *d : ctx.getTranslationUnitDecl()->noload_decls())
    if (inProject(d->getLocation())) projectDecls_.push_back(d);
  ctx.setTraversalScope(projectDecls_);
}

void Migration::forEachMatch(const internal::Matcher<Stmt> &matcher,
                             llvm::function_ref<void(const BoundNodes &)> onMatch) {
  auto all = decl(forEachDescendant(stmt(matcher)));
  for (const Decl *d : projectDecls_)
    for (const BoundNodes &nodes : match(all, *d, ctx)) onMatch(nodes);
}

void Migration::forEachMatch(const internal::Matcher<Decl> &matcher,
                             llvm::function_ref<void(const BoundNodes &)> onMatch) {
  auto all = decl(eachOf(matcher, forEachDescendant(decl(matcher))));
  for (const Decl *d : projectDecls_)
    for (const BoundNodes &nodes : match(all, *d, ctx)) onMatch(nodes);
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
  edit.file = sm.getFileEntryRefForID(sm.getFileID(begin))->getName().str();
  edit.offset = sm.getFileOffset(begin);
  edit.length = sm.getFileOffset(end) - edit.offset;
  edit.text = text.str();
  edit.rule = rule_ ? rule_->name : "";
  edit.line = sm.getSpellingLineNumber(begin);
  edit.column = sm.getSpellingColumnNumber(begin);
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
    f.file = entry->getName().str();
  f.line = sm.getSpellingLineNumber(loc);
  f.column = sm.getSpellingColumnNumber(loc);
  f.rule = rule_ ? rule_->name : "";
  f.reason = reason.str();
  f.suggestion = suggestion.str();
  f.level = level;
  out_.findings.push_back(std::move(f));
}

std::string Migration::text(SourceRange range) const { return sourceText(range, sm, lang); }

const FunctionDecl *Migration::asWrittenFunction(const FunctionDecl *fn) {
  if (!fn) return nullptr;
  if (const FunctionDecl *pattern = fn->getTemplateInstantiationPattern()) fn = pattern;
  return fn;
}

const FunctionDecl *Migration::enclosingFunction(const Stmt &node) {
  DynTypedNodeList parents = ctx.getParents(node);
  while (!parents.empty()) {
    const DynTypedNode &parent = parents[0];
    if (const auto *fn = parent.get<FunctionDecl>()) {
      const auto *method = dyn_cast<CXXMethodDecl>(fn);
      if (!method || !method->getParent()->isLambda()) return asWrittenFunction(fn);
    }
    parents = ctx.getParents(parent);
  }
  return nullptr;
}

void Migration::access(Fact fact, bool write) {
  if (rule_ && ((write ? rule_->produces : rule_->consumes) & fact)) return;
  llvm::report_fatal_error(llvm::Twine("acc-migrate: rule '") + (rule_ ? rule_->name : "(none)") + "' " +
                               (write ? "writes" : "reads") + " the fact '" + factName(fact) +
                               "' without declaring it (Rule::" + (write ? "produces" : "consumes") +
                               " in RuleRegistry.cpp)",
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
  facts_.filesUsingAcc.insert(sm.getFileID(sm.getFileLoc(loc)));
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

void runRules(ASTContext &ctx, const ProjectScope &scope, const std::vector<const Rule *> &rules,
              UnitResult &out) {
  Migration migration(ctx, scope, out);
  std::vector<const Rule *> steps = rules;
  for (const Rule &finalizer : allFinalizers()) steps.push_back(&finalizer);
  for (const Rule *rule : steps) {
    migration.setCurrentRule(rule);
    rule->apply(migration);
  }
  migration.setCurrentRule(nullptr);
}

}  // namespace accmigrate
