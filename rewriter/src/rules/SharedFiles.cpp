#include "rules/SharedFiles.h"

#include "analysis/Matchers.h"
#include "engine/EditText.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/StmtCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <algorithm>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

bool namesProcess(llvm::StringRef text) {
  return text.contains("is_main_process") || text.contains("is_local_main_process") || text.contains("process_index");
}

// The condition asks which process this is, directly or through a variable initialised from that
// (`const bool main = accelerator.is_main_process();`).
bool asksProcess(const Stmt *s, Migration &m) {
  if (!s) return false;
  if (const auto *ref = dyn_cast<DeclRefExpr>(s))
    if (const auto *var = dyn_cast<VarDecl>(ref->getDecl()); var && var->getInit())
      if (namesProcess(m.text(var->getInit()->getSourceRange()))) return true;
  if (const auto *e = dyn_cast<Expr>(s); e && namesProcess(m.text(e->getSourceRange()))) return true;
  for (const Stmt *child : s->children())
    if (asksProcess(child, m)) return true;
  return false;
}

// The nodes the compiler wraps around a full expression.
bool isWrapper(const Stmt *s) {
  return isa<ExprWithCleanups, ImplicitCastExpr, MaterializeTemporaryExpr, CXXBindTemporaryExpr, ParenExpr>(s);
}

}  // namespace

bool underProcessCheck(const Stmt &s, Migration &m) {
  for (DynTypedNodeList parents = m.ctx.getParents(s); !parents.empty(); parents = m.ctx.getParents(parents[0])) {
    if (parents[0].get<FunctionDecl>()) return false;  // a lambda's body: where it is defined decides
    if (const auto *ifStmt = parents[0].get<IfStmt>(); ifStmt && asksProcess(ifStmt->getCond(), m)) return true;
  }
  return false;
}

RankDependence sharedFileRanks(Migration &m) {
  RankDependence ranks = m.rankDependence();
  // What gather-for-metrics and reduce-metrics made the same on every process (a validation loss
  // reduced after its loop), as far as the running rule consumes those facts.
  m.assumeUniformValues(ranks);
  return ranks;
}

StatementPlace statementPlace(const Stmt &e, ASTContext &ctx) {
  const Stmt *node = &e;
  DynTypedNodeList parents = ctx.getParents(e);
  while (!parents.empty() && parents[0].get<Stmt>() && isWrapper(parents[0].get<Stmt>())) {
    node = parents[0].get<Stmt>();
    parents = ctx.getParents(*node);
  }
  if (parents.empty()) return StatementPlace::None;
  if (parents[0].get<CompoundStmt>()) return StatementPlace::Block;
  if (const auto *ifStmt = parents[0].get<IfStmt>())
    return node == ifStmt->getThen() || node == ifStmt->getElse() ? StatementPlace::Body : StatementPlace::None;
  const Stmt *body = nullptr;
  if (const auto *loop = parents[0].get<ForStmt>())
    body = loop->getBody();
  else if (const auto *loop = parents[0].get<WhileStmt>())
    body = loop->getBody();
  else if (const auto *loop = parents[0].get<DoStmt>())
    body = loop->getBody();
  else if (const auto *loop = parents[0].get<CXXForRangeStmt>())
    body = loop->getBody();
  return body && body == node ? StatementPlace::Body : StatementPlace::None;
}

bool surroundStatement(Migration &m, const Stmt &e, const std::vector<std::string> &before, llvm::StringRef prefix,
                       const std::vector<std::string> &after) {
  StatementPlace place = statementPlace(e, m.ctx);
  if (place == StatementPlace::None) return false;
  bool block = place == StatementPlace::Block;
  std::string indent = lineIndent(e.getBeginLoc(), m.sm);
  std::string head = block ? "" : "{ ";
  for (const std::string &s : before) head += s + (block ? "\n" + indent : " ");
  head += prefix.str();
  std::string tail;
  for (const std::string &s : after) tail += (block ? "\n" + indent : " ") + s;
  if (!block) tail += " }";
  if (!m.insert(e.getBeginLoc(), head)) return false;
  if (!tail.empty()) m.insert(statementRange(&e, m.sm, m.lang).getEnd(), tail);
  return true;
}

bool inTemplatePattern(const Stmt &s, ASTContext &ctx) {
  for (DynTypedNodeList parents = ctx.getParents(s); !parents.empty(); parents = ctx.getParents(parents[0]))
    if (const auto *fn = parents[0].get<FunctionDecl>()) return fn->isDependentContext();
  return false;
}

std::string declaredText(const VarDecl &var, Migration &m) {
  std::string text = m.text(SourceRange(var.getBeginLoc(), var.getLocation()));
  if (!text.empty() && text.find(',') == std::string::npos) return text;
  // The second variable of a declaration: its type alone.
  const TypeSourceInfo *type = var.getTypeSourceInfo();
  return (type ? m.text(type->getTypeLoc().getSourceRange()) + " " : "") + var.getNameAsString();
}

std::string argumentsText(const CXXConstructExpr &construct, Migration &m) {
  SourceRange parens = construct.getParenOrBraceRange();
  if (parens.isInvalid() || parens.getBegin().isMacroID() || parens.getEnd().isMacroID()) return "";
  SourceLocation begin = afterToken(parens.getBegin(), m.sm, m.lang);
  bool invalid = false;
  StringRef text = Lexer::getSourceText(CharSourceRange::getCharRange(begin, parens.getEnd()), m.sm, m.lang, &invalid);
  return invalid ? "" : text.str();
}

unsigned lineOf(SourceLocation loc, Migration &m) { return m.sm.getExpansionLineNumber(loc); }

std::string FileReads::pathKey(const Expr &path, Migration &m) {
  const Expr *e = path.IgnoreImplicit()->IgnoreParenImpCasts();
  // `std::string("best.pt")`, a conversion to std::string or std::filesystem::path.
  while (const auto *construct = dyn_cast<CXXConstructExpr>(e)) {
    if (construct->getNumArgs() == 0) break;
    e = construct->getArg(0)->IgnoreImplicit()->IgnoreParenImpCasts();
  }
  if (const auto *literal = dyn_cast<StringLiteral>(e)) return "\"" + literal->getBytes().str() + "\"";
  if (const auto *ref = dyn_cast<DeclRefExpr>(e))
    if (isa<VarDecl>(ref->getDecl()))  // by where it is declared: the same in a template and its instantiations
      return "var:" + std::to_string(ref->getDecl()->getLocation().getRawEncoding());
  std::string text = m.text(e->getSourceRange());
  text.erase(std::remove_if(text.begin(), text.end(), [](char c) { return isspace(static_cast<unsigned char>(c)); }),
             text.end());
  return text;
}

std::string FileReads::describe(const Expr &read, Migration &m) {
  DynTypedNodeList parents = m.ctx.getParents(read);
  if (const auto *var = parents.empty() ? nullptr : parents[0].get<VarDecl>())
    return m.text(SourceRange(var->getBeginLoc(), read.getEndLoc()));
  return m.text(read.getSourceRange());
}

std::shared_ptr<FileReads> FileReads::collect(Migration &m) {
  auto reads = std::make_shared<FileReads>();
  auto inFn = inFunction(functionDecl().bind("fn"));
  auto addRead = [&m, reads](const BoundNodes &nodes, const Expr *call, const Expr *path) {
    if (!path) return;
    reads->reads_[nodes.getNodeAs<FunctionDecl>("fn")->getCanonicalDecl()].push_back({call, pathKey(*path, m)});
  };
  m.onMatch(callExpr(callee(functionDecl(hasName("::torch::load"))), inFn).bind("read"),
            [addRead](const BoundNodes &nodes) {
              const auto *call = nodes.getNodeAs<CallExpr>("read");
              addRead(nodes, call, call->getNumArgs() >= 2 ? call->getArg(1) : nullptr);
            });
  auto reader = cxxRecordDecl(hasAnyName("::std::basic_ifstream", "::std::basic_fstream"));
  auto namedReader = cxxConstructorDecl(
      ofClass(reader), unless(anyOf(isDefaultConstructor(), isCopyConstructor(), isMoveConstructor())));
  m.onMatch(cxxConstructExpr(hasDeclaration(namedReader), inFn).bind("read"), [addRead](const BoundNodes &nodes) {
    const auto *construct = nodes.getNodeAs<CXXConstructExpr>("read");
    addRead(nodes, construct, construct->getNumArgs() ? construct->getArg(0) : nullptr);
  });
  m.onMatch(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("open"), ofClass(reader))), inFn).bind("read"),
            [addRead](const BoundNodes &nodes) {
              const auto *call = nodes.getNodeAs<CXXMemberCallExpr>("read");
              addRead(nodes, call, call->getNumArgs() ? call->getArg(0) : nullptr);
            });
  m.onMatch(callExpr(callee(functionDecl().bind("callee")), inFn).bind("call"), [&m, reads](const BoundNodes &nodes) {
    const auto *callee = nodes.getNodeAs<FunctionDecl>("callee");
    if (!m.inProject(callee->getLocation())) return;
    reads->calls_[nodes.getNodeAs<FunctionDecl>("fn")->getCanonicalDecl()].push_back(
        {nodes.getNodeAs<CallExpr>("call")->getBeginLoc(), Migration::asWrittenFunction(callee)->getCanonicalDecl()});
  });
  return reads;
}

FileReads::Read FileReads::readAfter(const Stmt &write, const Expr &path, Migration &m) const {
  const SourceManager &sm = m.sm;
  std::string key = pathKey(path, m);
  // The loops around the write: what is before it in their body runs again after it.
  std::vector<SourceRange> loops;
  for (DynTypedNodeList parents = m.ctx.getParents(write); !parents.empty(); parents = m.ctx.getParents(parents[0])) {
    if (parents[0].get<FunctionDecl>() || parents[0].get<LambdaExpr>()) break;
    if (const Stmt *s = parents[0].get<Stmt>(); s && isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(s))
      loops.push_back(s->getSourceRange());
  }
  auto later = [&](SourceLocation loc) {
    if (sm.isBeforeInTranslationUnit(write.getBeginLoc(), loc)) return true;
    return std::any_of(loops.begin(), loops.end(), [&](SourceRange r) {
      return !sm.isBeforeInTranslationUnit(loc, r.getBegin()) && !sm.isBeforeInTranslationUnit(r.getEnd(), loc);
    });
  };
  auto firstOf = [&](const FunctionDecl *fn, bool onlyLater) -> const Expr * {
    auto found = reads_.find(fn);
    if (found == reads_.end()) return nullptr;
    const Expr *first = nullptr;
    for (const PathRead &read : found->second)
      if (read.key == key && (!onlyLater || later(read.call->getBeginLoc())) &&
          (!first || sm.isBeforeInTranslationUnit(read.call->getBeginLoc(), first->getBeginLoc())))
        first = read.call;
    return first;
  };
  const FunctionDecl *fn = m.enclosingFunction(write);
  if (!fn) return {};
  fn = fn->getCanonicalDecl();
  if (const Expr *read = firstOf(fn, /*onlyLater=*/true)) return {read, true};
  // The functions called after the write, and those they call.
  std::vector<const FunctionDecl *> pending;
  std::set<const FunctionDecl *> seen{fn};
  auto follow = [&](const FunctionDecl *from, bool onlyLater) {
    auto found = calls_.find(from);
    if (found == calls_.end()) return;
    for (const Call &call : found->second)
      if ((!onlyLater || later(call.at)) && seen.insert(call.callee).second) pending.push_back(call.callee);
  };
  follow(fn, /*onlyLater=*/true);
  while (!pending.empty()) {
    const FunctionDecl *callee = pending.back();
    pending.pop_back();
    if (const Expr *read = firstOf(callee, /*onlyLater=*/false)) return {read, false};
    follow(callee, /*onlyLater=*/false);
  }
  return {};
}

}  // namespace accmigrate
