// save-on-main-process: `torch::save(...);` runs on every process, which then all write the same
// file at once. It becomes
//   accelerator.wait_for_everyone();
//   if (accelerator.is_main_process()) torch::save(...);
// (every process finishes its steps first; one writes). Saves that are not a statement of their own
// are reported with that change.
// The barrier is a collective: a rank that never reaches it leaves the others waiting until the
// timeout. So where whether (or how often) the save runs depends on a rank-local value (a loss, a
// reward, the process index: RankDependence.h), the save is only guarded, and the condition reported.
#include "Analysis.h"
#include "EditText.h"
#include "Matchers.h"
#include "Migration.h"
#include "RankDependence.h"
#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <map>
#include <memory>
#include <vector>

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

// Reports that `condition` keeps some ranks from the save, so no barrier goes before it.
static void reportRankLocalCondition(const Expr &condition, RankDependence &ranks, Migration &m) {
  const VarDecl *var = ranks.rankLocalVariable(&condition);
  std::string value = var ? var->getNameAsString() : "value";
  if (!var || !isTensor(var->getType())) value = "torch::tensor(" + value + ")";
  m.report(condition.getBeginLoc(),
           "the save is under `" + m.text(condition.getSourceRange()) +
               "`, which may differ between processes: no wait_for_everyone() inserted (it would hang the ranks "
               "that do not reach it)",
           "make the condition global, e.g. `accelerator.reduce(" + value +
               ", \"max\")`, then save after a barrier every rank reaches");
}

// A template's body is matched as written (its types dependent: rank dependence unknown) and once
// per instantiation: the instantiations decide, the pattern only when it has none.
static bool inTemplatePattern(const Stmt &call, ASTContext &ctx) {
  for (DynTypedNodeList parents = ctx.getParents(call); !parents.empty(); parents = ctx.getParents(parents[0]))
    if (const auto *fn = parents[0].get<FunctionDecl>()) return fn->isDependentContext();
  return false;
}

void registerSaveOnMainProcess(Migration &m) {
  // Each save once (by where it is written): its call, function, and the rank-local condition that
  // keeps some ranks from it, if any.
  struct Save {
    const CallExpr *call;
    const FunctionDecl *fn;
    const Expr *rankLocal;
    bool fromPattern;
  };
  struct State {
    RankDependence ranks;
    std::vector<Save> saves;
    std::map<SourceLocation, size_t> index;
  };
  auto state = std::make_shared<State>(State{RankDependence(m.ctx), {}, {}});
  m.onMatch(callExpr(callee(functionDecl(hasName("::torch::save"))), inFunction(functionDecl().bind("fn"))).bind("call"),
            [&m, state](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("call");
    if (guardedByMainProcess(*call, m)) return;
    Save save{call, nodes.getNodeAs<FunctionDecl>("fn"), state->ranks.rankLocalCondition(*call),
              inTemplatePattern(*call, m.ctx)};
    auto [it, added] = state->index.emplace(call->getBeginLoc(), state->saves.size());
    if (added) {
      state->saves.push_back(save);
      return;
    }
    Save &seen = state->saves[it->second];
    if (seen.fromPattern && !save.fromPattern) seen = save;
    else if (!save.fromPattern && !seen.rankLocal) seen.rankLocal = save.rankLocal;  // any instantiation's
  });
  m.atEnd([&m, state] {
    for (const Save &save : state->saves) {
      const CallExpr *call = save.call;
      std::string barrier = save.rankLocal ? "" : "accelerator.wait_for_everyone(); ";
      if (!isExpressionStatement(*call, m.ctx)) {
        m.report(call->getBeginLoc(), "torch::save runs on every process (all of them write the same file)",
                 "save on the main process only: `" + barrier + "if (accelerator.is_main_process()) " +
                     m.text(call->getSourceRange()) + ";`");
      } else {
        std::string indent = lineIndent(call->getBeginLoc(), m.sm);
        if (!m.insert(call->getBeginLoc(), (save.rankLocal ? "" : "accelerator.wait_for_everyone();\n" + indent) +
                                               "if (accelerator.is_main_process()) "))
          continue;
        m.useAccelerator(save.fn);
      }
      if (save.rankLocal) reportRankLocalCondition(*save.rankLocal, state->ranks, m);
    }
  });
}

}  // namespace accmigrate
