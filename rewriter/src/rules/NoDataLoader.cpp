// no-data-loader (report): a training loop (a loop that calls backward on a tensor) that is not
// inside a range-for over a libtorch DataLoader batches by hand (slices of one tensor, RL rollouts,
// a custom `while (loader(batch))`). After migration every process would train on all of the data;
// nothing in the loop says how to split it, so the user is told where and how.
#include "Migration.h"
#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {

static bool overDataLoader(const Stmt *loop) {
  const auto *rangeFor = dyn_cast<CXXForRangeStmt>(loop);
  return rangeFor && rangeFor->getRangeInit() && isDataLoader(rangeFor->getRangeInit()->getType());
}

void applyNoDataLoader(Migration &m) {
  auto tensorBackward = cxxMemberCallExpr(
      callee(cxxMethodDecl(hasName("backward"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::at::TensorBase"))))));
  auto loop = stmt(anyOf(forStmt(), cxxForRangeStmt(), whileStmt(), doStmt()));
  // The innermost loop around a backward call.
  m.forEachMatch(stmt(loop, hasDescendant(tensorBackward), unless(hasDescendant(stmt(loop, hasDescendant(tensorBackward)))))
                     .bind("loop"),
                 [&](const BoundNodes &nodes) {
    const auto *found = nodes.getNodeAs<Stmt>("loop");
    if (!m.enclosingFunction(*found)) return;
    for (const Stmt *s = found; s;) {
      if (overDataLoader(s)) return;
      // A template's pattern has no concrete loader type; its instantiations are checked instead.
      const auto *rangeFor = dyn_cast<CXXForRangeStmt>(s);
      if (rangeFor && rangeFor->getRangeInit() && rangeFor->getRangeInit()->isTypeDependent()) return;
      DynTypedNodeList parents = m.ctx.getParents(*s);
      s = parents.empty() ? nullptr : parents[0].get<Stmt>();
    }
    m.report(found->getBeginLoc(),
             "this training loop batches without a torch DataLoader: on N processes each one trains on all of the data",
             "give each process its share before the loop (`auto part = accelerator.split_between_processes(data);`, "
             "or step through batches from accelerator.process_index() by accelerator.num_processes()), or make the "
             "data a torch Dataset and use accelerator.prepare_data_loader");
  });
}

}  // namespace accmigrate
