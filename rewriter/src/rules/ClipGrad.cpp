// clip-grad: `torch::nn::utils::clip_grad_norm_/clip_grad_value_(params, v)` become the accelerator's,
// which unscale mixed-precision gradients first and clip only when gradients are synchronised.
#include "Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {

void registerClipGrad(Migration &m) {
  auto clip = functionDecl(hasAnyName("::torch::nn::utils::clip_grad_norm_",
                                      "::torch::nn::utils::clip_grad_value_"));
  m.onMatch(callExpr(callee(clip)).bind("call"), [&m](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("call");
    const auto *ref = dyn_cast<DeclRefExpr>(call->getCallee()->IgnoreImpCasts());
    if (!ref) return;
    SourceLocation begin = ref->getQualifierLoc() ? ref->getQualifierLoc().getBeginLoc()
                                                  : ref->getNameInfo().getBeginLoc();
    std::string name = ref->getNameInfo().getAsString();
    if (m.replace(SourceRange(begin, ref->getNameInfo().getEndLoc()), "accelerator." + name))
      m.useAccelerator(m.enclosingFunction(*call));
  });
}

}  // namespace accmigrate
