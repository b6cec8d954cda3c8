// view-batch-size (report): `x.view({batch_size, -1})` (or reshape) inside a loop over a DataLoader,
// with the row count taken from a variable. The last batch can be short, and more so once the data
// is split across processes; the row count must come from the tensor.
#include "Migration.h"
#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {

void applyViewBatchSize(Migration &m) {
  auto reshape = cxxMemberCallExpr(
      callee(cxxMethodDecl(hasAnyName("view", "reshape"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::at::TensorBase"))))),
      hasArgument(0, hasDescendant(initListExpr().bind("shape"))),
      hasAncestor(cxxForRangeStmt().bind("loop")));
  m.forEachMatch(reshape.bind("call"), [&](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CXXMemberCallExpr>("call");
    const auto *shape = nodes.getNodeAs<InitListExpr>("shape");
    const auto *loop = nodes.getNodeAs<CXXForRangeStmt>("loop");
    if (!loop->getRangeInit() || !isDataLoader(loop->getRangeInit()->getType()) || shape->getNumInits() < 2) return;
    const auto *rows = dyn_cast<DeclRefExpr>(shape->getInit(0)->IgnoreParenImpCasts());
    const auto *var = rows ? dyn_cast<VarDecl>(rows->getDecl()) : nullptr;
    if (!var || !var->getType()->isIntegerType()) return;
    std::string tensor = m.text(call->getImplicitObjectArgument()->IgnoreImpCasts()->getSourceRange());
    m.report(rows->getBeginLoc(),
             "assumes every batch has `" + var->getName().str() +
                 "` rows; the last batch (and each process's share of the data) can be shorter",
             "take the row count from the tensor: `" + (tensor.empty() ? std::string("x") : tensor) +
                 ".size(0)` instead of `" + var->getName().str() + "`");
  });
}

}  // namespace accmigrate
