// dataset-size-division (report): `correct / dataset.size().value()` (directly or through a variable
// initialised from it). With a prepared loader each process counts only its own shard, so the
// quotient is wrong by the number of processes; the count must be summed across processes first.
#include "Matchers.h"
#include "Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

void registerDatasetSizeDivision(Migration &m) {
  m.onMatch(binaryOperator(hasAnyOperatorName("/", "/="), hasRHS(datasetSize()), inFunction(functionDecl())).bind("div"),
            [&m](const BoundNodes &nodes) {
    const auto *div = nodes.getNodeAs<BinaryOperator>("div");
    std::string count = m.text(div->getLHS()->getSourceRange());
    m.report(div->getOperatorLoc(),
             "divides by the size of the whole dataset, but with a prepared loader each process sees only its shard",
             "sum the count over processes first, e.g. `auto total = accelerator.reduce(torch::tensor(" +
                 (count.empty() ? std::string("count") : count) + "), \"sum\").item<double>();`, then divide `total`");
  });
}

}  // namespace accmigrate
