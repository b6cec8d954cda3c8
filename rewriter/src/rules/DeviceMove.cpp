// device-move: moves that the accelerator now does are removed: `model->to(device);` for prepared
// models, `.to(device)`/`.cuda()` on batches of a prepared loader. The rest of the expression stays
// (`.to(device, torch::kF64)` keeps `.to(torch::kF64)`). Moves that must stay are kept: dtype-only,
// `.to(other.device())`, `.to(torch::kCPU)`, moves inside a model's own methods, and moves of tensors
// the program creates itself (hard-coded CUDA there becomes `accelerator.device()`).
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "analysis/TorchTypes.h"
#include "engine/EditText.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <memory>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

bool isDeviceArgument(const Expr *written) {
  return isDeviceClass(written->getType()) || isDeviceType(written->getType());
}

// `.to(d, ...)` whose first argument, as written, is a Device or a DeviceType.
AST_MATCHER(CXXMemberCallExpr, hasDeviceArgument) {
  return Node.getNumArgs() > 0 && isDeviceArgument(asWritten(Node.getArg(0)));
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

// Removes the move when the accelerator places the object (`prepared`); otherwise a hard-coded CUDA
// device becomes the accelerator's.
void apply(Migration &m, const CXXMemberCallExpr *call, const FunctionDecl *fn, bool prepared) {
  if (prepared) {
    removeMove(m, call);
    return;
  }
  // Tensors the program makes itself still need the device: the accelerator's, not GPU 0.
  if (call->getMethodDecl()->getName() == "cuda") {
    SourceRange name(call->getExprLoc(), call->getEndLoc());
    if (m.replace(name, "to(accelerator.device())")) m.useAccelerator(fn);
  } else if (isLiteralCudaDevice(asWritten(call->getArg(0)))) {
    if (m.replace(asWritten(call->getArg(0))->getSourceRange(), "accelerator.device()")) m.useAccelerator(fn);
  }
}

}  // namespace

void registerDeviceMove(Migration &m) {
  // Moves of models and tensors to a device (`.to(device)`, `.cuda()`), outside a model's own methods.
  auto move = cxxMemberCallExpr(
      callee(cxxMethodDecl(hasAnyName("to", "cuda"),
                           ofClass(anyOf(derivesFromClass("torch::nn::Module"), derivesFromClass("at::TensorBase"))))),
      anyOf(callee(cxxMethodDecl(hasName("cuda"))), hasDeviceArgument()),
      inFunction(functionDecl(unless(isModelMember())).bind("fn")));
  // Models are placed by accelerator.prepare: whether one is prepared is known once every function
  // has been seen (the fact prepared-models), so their moves are decided at the end.
  auto modelMoves = std::make_shared<std::vector<std::pair<const CXXMemberCallExpr *, const FunctionDecl *>>>();
  m.onMatch(move.bind("call"), [&m, modelMoves](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CXXMemberCallExpr>("call");
    const auto *fn = nodes.getNodeAs<FunctionDecl>("fn");
    if (call->getMethodDecl()->getName() != "cuda") {
      const Expr *device = asWritten(call->getArg(0));
      if (isCpuDevice(device) || followsAnotherTensor(device)) return;
    }
    if (derivesFrom(call->getMethodDecl()->getParent(), "torch::nn::Module")) {
      modelMoves->emplace_back(call, fn);
      return;
    }
    apply(m, call, fn, isBatchDerived(call->getImplicitObjectArgument(), m.ctx));
  });
  m.atEnd([&m, modelMoves] {
    for (auto [call, fn] : *modelMoves) apply(m, call, fn, m.isPrepared(rootVariable(call->getImplicitObjectArgument())));
  });
}

}  // namespace accmigrate
