// scheduler-declaration: LR schedulers are created as `acc::Scheduler<T>`, which steps only when the
// optimizer really stepped (not while accumulating gradients, not after a skipped fp16 step): the
// subclasses of torch::optim::LRScheduler and ReduceLROnPlateauScheduler (which libtorch declares
// apart, stepped with a metric once per epoch).
//
// A prepared scheduler steps num_processes times per call by default (Accelerate's
// step_scheduler_with_optimizer=True: a schedule counted in single-process batches ends on time).
// That is right for a scheduler stepped with the optimizer, and wrong for one stepped once per epoch:
// on 2 processes a StepLR(step_size=2) would decay every epoch. When a scheduler's step() is outside
// the innermost loop around every optimizer step() of its function, the accelerator this unit
// creates gets `step_scheduler_with_optimizer(false)` (Accelerate's option for exactly that case).
#include "analysis/TorchTypes.h"
#include "engine/Migration.h"
#include "rules/WrapCreations.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/StmtCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {
namespace {

const Stmt *innermostLoop(const Stmt &node, ASTContext &ctx) {
  DynTypedNodeList parents = ctx.getParents(node);
  while (!parents.empty()) {
    const Stmt *p = parents[0].get<Stmt>();
    if (!p) return nullptr;  // reached the function (or a declaration)
    if (isa<ForStmt>(p) || isa<CXXForRangeStmt>(p) || isa<WhileStmt>(p) || isa<DoStmt>(p)) return p;
    parents = ctx.getParents(*p);
  }
  return nullptr;
}

bool contains(const Stmt *outer, const Stmt *inner, const SourceManager &sm) {
  SourceRange o = outer->getSourceRange(), i = inner->getSourceRange();
  return !sm.isBeforeInTranslationUnit(i.getBegin(), o.getBegin()) &&
         !sm.isBeforeInTranslationUnit(o.getEnd(), i.getEnd());
}

auto stepOf(const std::string &base) {
  return cxxMemberCallExpr(callee(cxxMethodDecl(hasName("step"), ofClass(cxxRecordDecl(isSameOrDerivedFrom(base))))));
}

// `scheduler.step()` of LRScheduler's subclasses, `plateau.step(metric)` of ReduceLROnPlateauScheduler.
auto schedulerStep() {
  return cxxMemberCallExpr(
      anyOf(stepOf("::torch::optim::LRScheduler"), stepOf("::torch::optim::ReduceLROnPlateauScheduler")));
}

void stepOncePerCallWhenSteppedPerEpoch(Migration &m) {
  struct State {
    std::map<const FunctionDecl *, std::vector<const Stmt *>> optimizerLoops;  // innermost loops of step()
    std::vector<const CXXMemberCallExpr *> schedulerSteps;                     // in the order found
  };
  auto state = std::make_shared<State>();
  m.onMatch(stepOf("::torch::optim::Optimizer").bind("step"), [&m, state](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CXXMemberCallExpr>("step");
    if (const Stmt *loop = innermostLoop(*call, m.ctx)) state->optimizerLoops[m.enclosingFunction(*call)].push_back(loop);
  });
  m.onMatch(schedulerStep().bind("step"), [state](const BoundNodes &nodes) {
    state->schedulerSteps.push_back(nodes.getNodeAs<CXXMemberCallExpr>("step"));
  });
  // Once every optimizer step() is known.
  m.atEnd([&m, state] {
    for (const CXXMemberCallExpr *call : state->schedulerSteps) {
      auto loops = state->optimizerLoops.find(m.enclosingFunction(*call));
      if (loops == state->optimizerLoops.end()) continue;
      if (std::any_of(loops->second.begin(), loops->second.end(),
                      [&](const Stmt *loop) { return contains(loop, call, m.sm); }))
        continue;
      m.addAcceleratorOption("step_scheduler_with_optimizer(false)");
      m.report(call->getExprLoc(),
               "this scheduler steps outside the loop of the optimizer's step (e.g. once per epoch); a prepared "
               "scheduler would step once per process each time",
               "the accelerator created here gets AcceleratorOptions().step_scheduler_with_optimizer(false): "
               "one step per call",
               Finding::Level::Note);
      return;  // one option, one note per unit
    }
  });
}

}  // namespace

void registerSchedulerDeclaration(Migration &m) {
  for (const char *base : kSchedulerBases) wrapCreations(m, base, "acc::Scheduler");
  stepOncePerCallWhenSteppedPerEpoch(m);
}

}  // namespace accmigrate
