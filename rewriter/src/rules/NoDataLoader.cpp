// no-data-loader (report): a training loop (a loop that calls backward on a tensor) that is not
// inside a range-for over a libtorch DataLoader batches by hand (slices of one tensor, RL rollouts,
// a custom `while (loader(batch))`). After migration every process would train on all of the data;
// nothing in the loop says how to split it, so the user is told where and how.
#include "analysis/Matchers.h"
#include "analysis/TorchTypes.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

namespace {

bool overDataLoader(const Stmt *loop) {
  const auto *rangeFor = dyn_cast<CXXForRangeStmt>(loop);
  return rangeFor && rangeFor->getRangeInit() && isDataLoader(rangeFor->getRangeInit()->getType());
}

// The loop, or a statement around it in its function, is a range-for over a DataLoader; or, in a
// template's pattern, over something whose type is not known yet (its instantiations are checked
// instead).
AST_MATCHER(Stmt, batchesFromDataLoader) {
  ASTContext &ctx = Finder->getASTContext();
  for (const Stmt *s = &Node; s;) {
    if (overDataLoader(s)) return true;
    const auto *rangeFor = dyn_cast<CXXForRangeStmt>(s);
    if (rangeFor && rangeFor->getRangeInit() && rangeFor->getRangeInit()->isTypeDependent()) return true;
    DynTypedNodeList parents = ctx.getParents(*s);
    s = parents.empty() ? nullptr : parents[0].get<Stmt>();
  }
  return false;
}

}  // namespace

void registerNoDataLoader(Migration &m) {
  // A tensor's backward, or the accelerator's (`accelerator.backward(loss)`: migrated code, which must
  // keep the finding on a second run).
  auto tensorBackward = cxxMemberCallExpr(anyOf(
      callee(cxxMethodDecl(hasName("backward"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::at::TensorBase"))))),
      allOf(callee(cxxMethodDecl(hasName("backward"))), isOnAccelerator())));
  auto loop = stmt(anyOf(forStmt(), cxxForRangeStmt(), whileStmt(), doStmt()));
  // The innermost loop around a backward call, in a function, not batching from a DataLoader.
  m.onMatch(stmt(loop, unless(batchesFromDataLoader()), inFunction(functionDecl()), hasDescendant(tensorBackward),
                 unless(hasDescendant(stmt(loop, hasDescendant(tensorBackward)))))
                .bind("loop"),
            [&m](const BoundNodes &nodes) {
    m.report(nodes.getNodeAs<Stmt>("loop")->getBeginLoc(),
             "this training loop batches without a torch DataLoader: on N processes each one trains on all of the data",
             "give each process its share before the loop (`auto part = accelerator.split_between_processes(data);`, "
             "or step through batches from accelerator.process_index() by accelerator.num_processes()), or make the "
             "data a torch Dataset and use accelerator.prepare_data_loader");
  });
}

}  // namespace accmigrate
