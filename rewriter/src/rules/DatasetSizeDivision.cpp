// dataset-size-division (report): `correct / dataset.size().value()` (directly or through a variable
// initialised from it). With a prepared loader each process counts only its own shard, so the
// quotient is wrong by the number of processes. Summing the counts over processes is not the fix:
// the loader repeats samples to give every process as many batches (40 validation images count as
// 48 on 3 processes of batch 8); accelerator.gather_for_metrics drops the repeats. It consumes
// gathered-counts: the counts gather-for-metrics rewrote to count gathered tensors are right as written;
// and reduced-values: a count reduce-metrics sums over processes is right but for the repeated samples
// (a note).
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <memory>
#include <set>
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
    std::set<SourceLocation> reduced;  // where each reduced variable is declared (patterns and instantiations alike)
    for (auto [var, point] : m.reducedValues()) reduced.insert(var->getLocation());
    std::set<SourceLocation> reported;
    for (const BinaryOperator *div : *divisions) {
      if (!reported.insert(div->getOperatorLoc()).second) continue;
      if (mentionsVariable(div->getLHS(), [&](const VarDecl *var) { return m.isGatheredCount(var); })) continue;
      std::string count = m.text(div->getLHS()->getSourceRange());
      if (count.empty()) count = "the count";
      if (mentionsVariable(div->getLHS(), [&](const VarDecl *var) { return reduced.count(var->getLocation()) > 0; })) {
        m.report(div->getOperatorLoc(),
                 "`" + count + "` is summed over the processes after its loop (reduce-metrics), which also counts the "
                     "samples the prepared loader repeats to even out the processes when the dataset's size is not a "
                     "multiple of the number of processes times the batch size",
                 "for an exact count, compute it from gathered predictions and targets, "
                 "`accelerator.gather_for_metrics(...)`, which drops the repeats",
                 Finding::Level::Note);
        continue;
      }
      m.report(div->getOperatorLoc(),
               "divides by the size of the whole dataset, but with a prepared loader each process counts only its "
               "shard, and the loader repeats samples to even out the shards",
               "gather each batch's predictions and targets with `accelerator.gather_for_metrics(...)` (it drops the "
               "repeated samples), compute `" + count +
                   "` from the gathered tensors and divide by the number of gathered samples (summing the count with "
                   "`accelerator.reduce` would count the repeats)");
    }
  });
}

}  // namespace accmigrate
