// dataset-size-division (report): `correct / dataset.size().value()` (directly or through a variable
// initialised from it). With a prepared loader each process counts only its own shard, so the
// quotient is wrong by the number of processes. Summing the counts over processes is not the fix:
// the loader repeats samples to give every process as many batches (40 validation images count as
// 48 on 3 processes of batch 8); accelerator.gather_for_metrics drops the repeats. It consumes
// gathered-counts: the counts gather-for-metrics rewrote to count gathered tensors are right as written.
#include "Analysis.h"
#include "Matchers.h"
#include "Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <memory>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

void registerDatasetSizeDivision(Migration &m) {
  // Which counts gather-for-metrics gathered (the fact gathered-counts) is known after the traversal.
  auto divisions = std::make_shared<std::vector<const BinaryOperator *>>();
  m.onMatch(
      binaryOperator(hasAnyOperatorName("/", "/="), hasRHS(datasetSize()), inFunction(functionDecl())).bind("div"),
      [divisions](const BoundNodes &nodes) { divisions->push_back(nodes.getNodeAs<BinaryOperator>("div")); });
  m.atEnd([&m, divisions] {
    for (const BinaryOperator *div : *divisions) {
      if (mentionsVariable(div->getLHS(), [&](const VarDecl *var) { return m.isGatheredCount(var); })) continue;
      std::string count = m.text(div->getLHS()->getSourceRange());
      m.report(div->getOperatorLoc(),
               "divides by the size of the whole dataset, but with a prepared loader each process counts only its "
               "shard, and the loader repeats samples to even out the shards",
               "gather each batch's predictions and targets with `accelerator.gather_for_metrics(...)` (it drops the "
               "repeated samples), compute `" + (count.empty() ? std::string("the count") : count) +
                   "` from the gathered tensors and divide by the number of gathered samples (summing the count with "
                   "`accelerator.reduce` would count the repeats; --rules=+gather-for-metrics rewrites "
                   "`count += a.eq(b).sum().item<T>()` in the loader loop)");
    }
  });
}

}  // namespace accmigrate
