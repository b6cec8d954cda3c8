// view-batch-size (report): `x.view({batch_size, -1})` (or reshape) inside a loop over a DataLoader,
// with the row count taken from a variable. The last batch can be short, and more so once the data
// is split across processes; the row count must come from the tensor.
#include "analysis/Matchers.h"
#include "analysis/TorchTypes.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

void registerViewBatchSize(Migration &m) {
  // A shape of two or more sizes whose first is an integer variable, in a loop over a DataLoader (the
  // innermost range-for around the call).
  auto rowsFromVariable = initListExpr(
      hasInit(1, expr()), hasInit(0, ignoringParenImpCasts(declRefExpr(to(varDecl(hasType(isInteger())).bind("var"))).bind("rows"))));
  auto reshape = cxxMemberCallExpr(
      callee(cxxMethodDecl(hasAnyName("view", "reshape"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::at::TensorBase"))))),
      hasArgument(0, hasDescendant(rowsFromVariable)),
      nearestRangeFor(cxxForRangeStmt(hasRangeInit(expr(hasType(isDataLoaderType()))))));
  m.onMatch(reshape.bind("call"), [&m](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CXXMemberCallExpr>("call");
    const auto *rows = nodes.getNodeAs<DeclRefExpr>("rows");
    const auto *var = nodes.getNodeAs<VarDecl>("var");
    std::string tensor = m.text(call->getImplicitObjectArgument()->IgnoreImpCasts()->getSourceRange());
    m.report(rows->getBeginLoc(),
             "assumes every batch has `" + var->getName().str() +
                 "` rows; the last batch (and each process's share of the data) can be shorter",
             "take the row count from the tensor: `" + (tensor.empty() ? std::string("x") : tensor) +
                 ".size(0)` instead of `" + var->getName().str() + "`");
  });
}

}  // namespace accmigrate
