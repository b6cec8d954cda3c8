#include "Migration.h"

#include "EditText.h"

#include <clang/AST/ParentMapContext.h>
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
  edit.rule = currentRule;
  edit.line = sm.getSpellingLineNumber(begin);
  edit.column = sm.getSpellingColumnNumber(begin);
  out_.edits.push_back(std::move(edit));
  if (text.contains("accelerator") || text.contains("acc::")) noteUsesAcc(begin);
  return true;
}

bool Migration::insert(SourceLocation at, StringRef text) {
  return replace(CharSourceRange::getCharRange(at, at), text);
}

bool Migration::edited(SourceLocation loc) const {
  if (loc.isMacroID()) return false;
  unsigned offset = sm.getFileOffset(loc);
  StringRef file = sm.getFileEntryRefForID(sm.getFileID(loc))->getName();
  for (const Edit &e : out_.edits)
    if (e.file == file && offset >= e.offset && offset < e.offset + std::max(e.length, 1u)) return true;
  return false;
}

void Migration::report(SourceLocation loc, const Twine &reason, const Twine &suggestion,
                       Finding::Level level) {
  loc = sm.getExpansionLoc(loc);  // for a macro, where the user wrote it
  Finding f;
  if (OptionalFileEntryRef entry = sm.getFileEntryRefForID(sm.getFileID(loc)))
    f.file = entry->getName().str();
  f.line = sm.getSpellingLineNumber(loc);
  f.column = sm.getSpellingColumnNumber(loc);
  f.rule = currentRule;
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

void Migration::useAccelerator(const FunctionDecl *fn) {
  fn = asWrittenFunction(fn);
  if (fn && std::find(users_.begin(), users_.end(), fn) == users_.end()) users_.push_back(fn);
}

void Migration::noteUsesAcc(SourceLocation loc) { filesUsingAcc_.insert(sm.getFileID(sm.getFileLoc(loc))); }

}  // namespace accmigrate
