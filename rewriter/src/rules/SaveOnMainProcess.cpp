// save-on-main-process: `torch::save(...);` runs on every process, which then all write the same
// file at once. It becomes
//   accelerator.wait_for_everyone();
//   if (accelerator.is_main_process()) torch::save(...);
// (every process finishes its steps first; one writes). Saves that are not a statement of their own
// are reported with that change.
#include "Analysis.h"
#include "EditText.h"
#include "Matchers.h"
#include "Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

// The statement that holds `call` is already `if (...is_main_process()) ...` (a migrated file).
static bool guardedByMainProcess(const Stmt &call, Migration &m) {
  for (DynTypedNodeList parents = m.ctx.getParents(call); !parents.empty();) {
    if (const auto *ifStmt = parents[0].get<IfStmt>())
      return m.text(ifStmt->getCond()->getSourceRange()).find("is_main_process") != std::string::npos;
    const Stmt *p = parents[0].get<Stmt>();
    if (!p || !isa<Expr>(p)) return false;
    parents = m.ctx.getParents(*p);
  }
  return false;
}

void registerSaveOnMainProcess(Migration &m) {
  m.onMatch(callExpr(callee(functionDecl(hasName("::torch::save"))), inFunction(functionDecl().bind("fn"))).bind("call"),
            [&m](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("call");
    const auto *fn = nodes.getNodeAs<FunctionDecl>("fn");
    if (guardedByMainProcess(*call, m)) return;
    if (!isExpressionStatement(*call, m.ctx)) {
      m.report(call->getBeginLoc(), "torch::save runs on every process (all of them write the same file)",
               "save on the main process only: `accelerator.wait_for_everyone(); if (accelerator.is_main_process()) " +
                   m.text(call->getSourceRange()) + ";`");
      return;
    }
    std::string indent = lineIndent(call->getBeginLoc(), m.sm);
    if (m.insert(call->getBeginLoc(),
                 "accelerator.wait_for_everyone();\n" + indent + "if (accelerator.is_main_process()) "))
      m.useAccelerator(fn);
  });
}

}  // namespace accmigrate
