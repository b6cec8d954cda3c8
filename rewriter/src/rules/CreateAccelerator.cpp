// create-accelerator: `acc::Accelerator accelerator;` at the start of the function that runs the
// training. A function that uses the accelerator but is called from another project function gets
// it as a first parameter `acc::Accelerator& accelerator` instead, and its callers pass theirs, so
// the program has one accelerator however its training code is split into functions. Options other
// rules asked for (the fact accelerator-options) go into its constructor.
#include "Analysis.h"
#include "EditText.h"
#include "Migration.h"
#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/TypeLoc.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <map>
#include <memory>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {
namespace {

bool hasAccelerator(const FunctionDecl *fn) {
  for (const ParmVarDecl *p : fn->parameters())
    if (isAccelerator(p->getType())) return true;
  struct Finder : RecursiveASTVisitor<Finder> {
    bool found = false;
    bool VisitVarDecl(VarDecl *v) {
      found |= isAccelerator(v->getType());
      return true;
    }
  } finder;
  finder.TraverseStmt(fn->getBody());
  if (const auto *method = dyn_cast<CXXMethodDecl>(fn))
    for (const FieldDecl *f : method->getParent()->fields()) finder.found |= isAccelerator(f->getType());
  return finder.found;
}

void declareLocal(Migration &m, const FunctionDecl *fn) {
  const auto *body = dyn_cast_or_null<CompoundStmt>(fn->getBody());
  if (!body) return;
  std::string indent = body->body_empty() ? lineIndent(fn->getBeginLoc(), m.sm) + "  "
                                          : lineIndent(body->body_front()->getBeginLoc(), m.sm);
  std::string options;
  for (const std::string &setter : m.acceleratorOptions()) options += "." + setter;
  std::string declaration = options.empty() ? "acc::Accelerator accelerator;"
                                            : "acc::Accelerator accelerator(acc::AcceleratorOptions()" + options + ");";
  m.insert(afterToken(body->getLBracLoc(), m.sm, m.lang), "\n" + indent + declaration);
}

void addParameter(Migration &m, const FunctionDecl *fn) {
  std::vector<const FunctionDecl *> decls(fn->redecls_begin(), fn->redecls_end());
  for (const FunctionDecl *decl : decls) {
    if (!m.inProject(decl->getLocation())) continue;
    FunctionTypeLoc loc = decl->getFunctionTypeLoc();
    if (!loc) continue;
    m.insert(afterToken(loc.getLParenLoc(), m.sm, m.lang),
             decl->getNumParams() ? "acc::Accelerator& accelerator, " : "acc::Accelerator& accelerator");
  }
}

void passArgument(Migration &m, const CallExpr *call) {
  unsigned first = isa<CXXOperatorCallExpr>(call) ? 1 : 0;
  for (unsigned i = first; i < call->getNumArgs(); ++i) {
    const Expr *arg = call->getArg(i);
    if (isa<CXXDefaultArgExpr>(arg)) break;
    m.insert(arg->getBeginLoc(), "accelerator, ");
    return;
  }
  m.insert(call->getRParenLoc(), "accelerator");
}

using CallSites = std::map<const FunctionDecl *, std::vector<const CallExpr *>>;

// Once every rule has said which functions use the accelerator.
void declareOrPass(Migration &m, const CallSites &callsTo) {
  std::vector<const FunctionDecl *> users = m.acceleratorUsers();
  if (users.empty()) return;

  std::vector<const FunctionDecl *> passed;  // get the accelerator as a parameter
  for (size_t i = 0; i < users.size(); ++i) {
    const FunctionDecl *fn = users[i];
    if (fn->isMain() || hasAccelerator(fn)) continue;
    auto calls = callsTo.find(fn->getCanonicalDecl());
    if (calls == callsTo.end()) continue;
    if (const auto *method = dyn_cast<CXXMethodDecl>(fn); method && method->isVirtual()) {
      m.report(fn->getLocation(), "virtual `" + fn->getName() + "` uses the accelerator and is called from other functions",
               "give its class an `acc::Accelerator&` member set at construction");
      continue;
    }
    passed.push_back(fn);
    for (const CallExpr *call : calls->second) {
      const FunctionDecl *caller = m.enclosingFunction(*call);
      if (!caller) continue;
      passArgument(m, call);
      if (std::find(users.begin(), users.end(), caller) == users.end()) users.push_back(caller);
    }
  }
  for (const FunctionDecl *fn : users) {
    if (hasAccelerator(fn)) continue;
    if (std::find(passed.begin(), passed.end(), fn) != passed.end()) addParameter(m, fn);
    else declareLocal(m, fn);
  }
}

}  // namespace

void registerCreateAccelerator(Migration &m) {
  // Call sites of project functions, by the function called (as written).
  auto callsTo = std::make_shared<CallSites>();
  m.onMatch(callExpr(callee(functionDecl())).bind("call"), [callsTo](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("call");
    const FunctionDecl *callee = Migration::asWrittenFunction(call->getDirectCallee());
    if (callee) (*callsTo)[callee->getCanonicalDecl()].push_back(call);
  });
  m.atEnd([&m, callsTo] { declareOrPass(m, *callsTo); });
}

}  // namespace accmigrate
