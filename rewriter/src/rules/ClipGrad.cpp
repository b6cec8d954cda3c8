// clip-grad: `torch::nn::utils::clip_grad_norm_/clip_grad_value_(params, v)` become the accelerator's,
// which unscale mixed-precision gradients first and clip only when gradients are synchronised.
//
// libtorch declares each for a `const std::vector<Tensor>&`, a `std::initializer_list<Tensor>` and a
// single `Tensor` (torch/nn/utils/clip_grad.h), clip_grad_norm_ with `norm_type = 2.0` and
// `error_if_nonfinite = false` after max_norm; acc's take the vector (and norm_type). A braced list
// converts to the vector as it is; a single tensor is braced (`{p}`); a call that gives
// error_if_nonfinite, which acc's has not, is reported with the line to write.
#include "analysis/TorchTypes.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {

void registerClipGrad(Migration &m) {
  auto clip = functionDecl(hasAnyName("::torch::nn::utils::clip_grad_norm_", "::torch::nn::utils::clip_grad_value_"));
  m.onMatch(callExpr(callee(clip)).bind("call"), [&m](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("call");
    const auto *ref = dyn_cast<DeclRefExpr>(call->getCallee()->IgnoreImpCasts());
    const FunctionDecl *fn = call->getDirectCallee();
    if (!ref || !fn || call->getNumArgs() < 2) return;
    std::string name = ref->getNameInfo().getAsString();
    std::string params = m.text(call->getArg(0)->getSourceRange());
    // The overload for one tensor: acc's takes a list.
    bool single = fn->getNumParams() > 0 && isTensor(fn->getParamDecl(0)->getType());
    if (call->getNumArgs() >= 4 && !isa<CXXDefaultArgExpr>(call->getArg(3))) {
      m.report(call->getBeginLoc(),
               "`" + name + "` with error_if_nonfinite: acc's clip_grad_norm_ has no such argument",
               "write `double norm = accelerator.clip_grad_norm_(" + (single ? "{" + params + "}" : params) + ", " +
                   m.text(call->getArg(1)->getSourceRange()) + ", " + m.text(call->getArg(2)->getSourceRange()) +
                   ");` and check `std::isfinite(norm)` yourself");
      return;
    }
    SourceLocation begin =
        ref->getQualifierLoc() ? ref->getQualifierLoc().getBeginLoc() : ref->getNameInfo().getBeginLoc();
    if (!m.replace(SourceRange(begin, ref->getNameInfo().getEndLoc()), "accelerator." + name)) return;
    if (single && !params.empty()) m.replace(call->getArg(0)->getSourceRange(), "{" + params + "}");
    m.useAccelerator(m.enclosingFunction(*call));
  });
}

}  // namespace accmigrate
