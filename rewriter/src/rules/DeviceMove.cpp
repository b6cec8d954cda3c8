// device-move: moves that the accelerator now does are removed: `model->to(device);` for prepared
// models, `.to(device)`/`.cuda()` on batches of a prepared loader. The rest of the expression stays
// (`.to(device, torch::kF64)` keeps `.to(torch::kF64)`). Moves that must stay are kept: dtype-only,
// `.to(other.device())`, `.to(torch::kCPU)`, moves inside a model's own methods, and moves of tensors
// the program creates itself (hard-coded CUDA there becomes `accelerator.device()`).
#include "Analysis.h"
#include "EditText.h"
#include "Migration.h"
#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {
namespace {

bool isDeviceArgument(const Expr *written) {
  return isDeviceClass(written->getType()) || isDeviceType(written->getType());
}

// `.to(x.device())`: follows another tensor, whatever device that is.
bool followsAnotherTensor(const Expr *written) {
  const auto *call = dyn_cast<CXXMemberCallExpr>(written);
  return call && call->getMethodDecl() && call->getMethodDecl()->getName() == "device";
}

// `x = x.to(device);` assigns a variable its own move: the whole statement goes.
bool isSelfAssignment(const CXXMemberCallExpr *call, ASTContext &ctx, const Stmt **statement) {
  for (DynTypedNodeList parents = ctx.getParents(*call); !parents.empty();) {
    const Stmt *p = parents[0].get<Stmt>();
    if (!p) return false;
    const Expr *lhs = nullptr;
    if (const auto *op = dyn_cast<CXXOperatorCallExpr>(p); op && op->getOperator() == OO_Equal)
      lhs = op->getArg(0);
    else if (const auto *bin = dyn_cast<BinaryOperator>(p); bin && bin->getOpcode() == BO_Assign)
      lhs = bin->getLHS();
    if (lhs) {
      const auto *target = dyn_cast<DeclRefExpr>(lhs->IgnoreParenImpCasts());
      const auto *source = dyn_cast<DeclRefExpr>(call->getImplicitObjectArgument()->IgnoreParenImpCasts());
      *statement = p;
      return target && source && target->getDecl() == source->getDecl() && isExpressionStatement(*p, ctx);
    }
    if (!isa<ImplicitCastExpr>(p) && !isa<MaterializeTemporaryExpr>(p) && !isa<CXXBindTemporaryExpr>(p) &&
        !isa<CXXConstructExpr>(p) && !isa<ExprWithCleanups>(p))
      return false;
    parents = ctx.getParents(*p);
  }
  return false;
}

void removeMove(Migration &m, const CXXMemberCallExpr *call) {
  // `.to(device, torch::kF64, ...)`: keep the conversion.
  if (call->getNumArgs() >= 2 && !isa<CXXDefaultArgExpr>(call->getArg(1)) &&
      isScalarType(asWritten(call->getArg(1))->getType())) {
    m.remove(CharSourceRange::getCharRange(call->getArg(0)->getBeginLoc(), call->getArg(1)->getBeginLoc()));
    return;
  }
  const Stmt *assignment = nullptr;
  if (isExpressionStatement(*call, m.ctx)) {
    m.remove(removalRange(statementRange(call, m.sm, m.lang), m.sm));
    return;
  }
  if (isSelfAssignment(call, m.ctx, &assignment)) {
    m.remove(removalRange(statementRange(assignment, m.sm, m.lang), m.sm));
    return;
  }
  const Expr *object = call->getImplicitObjectArgument();
  m.remove(CharSourceRange::getCharRange(afterToken(object->getEndLoc(), m.sm, m.lang),
                                         afterToken(call->getEndLoc(), m.sm, m.lang)));
}

}  // namespace

void applyDeviceMove(Migration &m) {
  m.forEachMatch(cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("to", "cuda")))).bind("call"),
                 [&](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CXXMemberCallExpr>("call");
    const CXXMethodDecl *method = call->getMethodDecl();
    bool isModel = derivesFrom(method->getParent(), "torch::nn::Module");
    if (!isModel && !derivesFrom(method->getParent(), "at::TensorBase")) return;
    bool isCuda = method->getName() == "cuda";
    const Expr *device = nullptr;
    if (!isCuda) {
      if (call->getNumArgs() == 0) return;
      device = asWritten(call->getArg(0));
      if (!isDeviceArgument(device) || isCpuDevice(device) || followsAnotherTensor(device)) return;
    }
    const FunctionDecl *fn = m.enclosingFunction(*call);
    if (!fn || isModelMethod(fn)) return;

    const Expr *object = call->getImplicitObjectArgument();
    bool prepared = isModel ? m.isPrepared(rootVariable(object)) : isBatchDerived(object, m.ctx);
    if (prepared) {
      removeMove(m, call);
      return;
    }
    // Tensors the program makes itself still need the device: the accelerator's, not GPU 0.
    if (isCuda) {
      SourceRange name(call->getExprLoc(), call->getEndLoc());
      if (m.replace(name, "to(accelerator.device())")) m.useAccelerator(fn);
    } else if (isLiteralCudaDevice(device)) {
      if (m.replace(device->getSourceRange(), "accelerator.device()")) m.useAccelerator(fn);
    }
  });
}

}  // namespace accmigrate
