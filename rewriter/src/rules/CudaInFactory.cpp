// cuda-in-factory (report): torch::kCUDA (or a "cuda:N" device) passed to a factory or a loader
// (`torch::randn({n}, torch::kCUDA)`, `TensorOptions().device(torch::kCUDA)`, `torch::load(m, p, kCUDA)`,
// `torch::zeros({n}, torch::Device("cuda:1"))`).
// On N processes each must use its own device; these calls may sit in helpers without the
// accelerator, so the change is left to the user. `.to(kCUDA)`/`.cuda()` are handled by device-move,
// devices by device-declaration, static initialisers by static-cuda.
#include "analysis/Matchers.h"
#include "engine/Migration.h"
#include "rules/CudaReports.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

void registerCudaInFactory(Migration &m) {
  m.onMatch(expr(anyOf(cudaReference(), cudaDeviceString()), inFunction(functionDecl())).bind("ref"),
            [&m](const BoundNodes &nodes) {
    const auto *ref = nodes.getNodeAs<Expr>("ref");
    // The nearest call around the reference (through conversions, `?:` and Device(...) constructions).
    const CallExpr *call = nullptr;
    for (DynTypedNodeList parents = m.ctx.getParents(*ref); !parents.empty() && !call;) {
      const Expr *p = parents[0].get<Expr>();
      if (!p) break;
      call = dyn_cast<CallExpr>(p);
      parents = m.ctx.getParents(*p);
    }
    if (!call || isa<CXXOperatorCallExpr>(call)) return;
    if (const auto *member = dyn_cast<CXXMemberCallExpr>(call))
      if (const CXXMethodDecl *method = member->getMethodDecl())
        if (method->getName() == "to" || method->getName() == "cuda") return;
    m.report(ref->getBeginLoc(), "hard-coded CUDA device passed to a call: every process would use cuda:0",
             "pass the process's device instead: `accelerator.device()` (or the migrated `device` variable)");
  });
}

}  // namespace accmigrate
