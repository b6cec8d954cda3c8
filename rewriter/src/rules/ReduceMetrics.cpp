// reduce-metrics: a number a function accumulates over the batches of a loader and reads after the
// loop (an epoch's loss, a validation loss, a count of samples) holds, with a prepared loader, this
// process's share only. After the loop it becomes the value over all processes:
//   for (auto &batch : *loader) { ...; total += loss.item<double>(); }
//   total = accelerator.reduce(total, "mean");      // inserted
// "mean" where each step adds a mean over the batch's samples (a loss with the default reduction:
// the global batch's mean is the mean of the processes' means, the prepared loader giving each as
// many samples), "sum" where it adds a sum over them (a count, a Reduction::Sum loss,
// `target.size(0)`): MetricShare.h decides. Steps whose share is unknown, a loop some processes may
// not run to its end (RankDependence.h), or an accumulator that outlives an enclosing loop (it would
// be reduced again with the next epoch's local steps added) are left alone. Counts that
// gather-for-metrics already counts over all processes (the fact gathered-counts) are not reduced
// again. It produces reduced-values: after the inserted line the variable is the same on every
// process, which the rules that insert barriers or reduce printed values consume.
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "analysis/MetricShare.h"
#include "analysis/RankDependence.h"
#include "analysis/TorchTypes.h"
#include "engine/EditText.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/StmtCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

// One accumulator of one loop: the variable (an instantiation's own, in a template) and its steps.
struct Accumulation {
  const VarDecl *var;
  const CXXForRangeStmt *loop;
  const FunctionDecl *fn;              // as written (the template for an instantiation)
  std::vector<const Expr *> increments;  // null for ++/--: one batch, the same count on every process
};

// The function whose body declares `var` (an instantiation's own body, unlike functionOf).
const FunctionDecl *declaringFunction(const VarDecl *var) {
  for (const DeclContext *dc = var->getDeclContext(); dc; dc = dc->getParent())
    if (const auto *fn = dyn_cast<FunctionDecl>(dc)) return fn;
  return nullptr;
}

// `var` is read after `point` in `fn`'s body.
bool readAfter(const VarDecl *var, SourceLocation point, const FunctionDecl *fn, const SourceManager &sm) {
  bool found = false;
  std::function<void(const Stmt *)> scan = [&](const Stmt *s) {
    if (!s || found) return;
    if (const auto *ref = dyn_cast<DeclRefExpr>(s))
      found = ref->getDecl() == var && sm.isBeforeInTranslationUnit(point, ref->getLocation());
    for (const Stmt *child : s->children()) scan(child);
  };
  scan(fn->getBody());
  return found;
}

// `var = accelerator.reduce(var, ...)` is among the reductions that follow `loop` in its block (a
// migrated file).
bool reducedAlready(const VarDecl *var, const Stmt &loop, ASTContext &ctx) {
  const CompoundStmt *block = parentBlock(loop, ctx);
  if (!block) return false;
  bool after = false;
  for (const Stmt *s : block->body()) {
    if (s == &loop) {
      after = true;
      continue;
    }
    if (!after) continue;
    const Expr *e = dyn_cast<Expr>(s);
    if (const auto *cleanups = dyn_cast_or_null<ExprWithCleanups>(e)) e = cleanups->getSubExpr();
    const auto *assign = dyn_cast_or_null<BinaryOperator>(e);
    if (!assign || assign->getOpcode() != BO_Assign) return false;
    const auto *target = dyn_cast<DeclRefExpr>(assign->getLHS()->IgnoreParenImpCasts());
    const auto *call = dyn_cast<CXXMemberCallExpr>(assign->getRHS()->IgnoreParenImpCasts());
    if (!target || !call || !call->getMethodDecl() || call->getMethodDecl()->getName() != "reduce" ||
        !isAccelerator(call->getImplicitObjectArgument()->getType()))
      return false;  // the lines reduce-metrics writes after a loop end here
    if (target->getDecl() == var) return true;
  }
  return false;
}

// The accumulator lives as long as one run of the loop: no loop lies between its declaration and the
// loop (a total declared before the epoch loop and never reset would be reduced once per epoch, each
// time with the next epoch's local steps added to the global sum).
bool resetForEachRun(const VarDecl *var, const Stmt &loop, ASTContext &ctx) {
  const Stmt *declBlock = nullptr;
  for (const DynTypedNode &parent : ctx.getParents(*var))
    if (const auto *declStmt = parent.get<DeclStmt>())
      for (const DynTypedNode &grand : ctx.getParents(*declStmt)) declBlock = grand.get<CompoundStmt>();
  if (!declBlock) return false;
  for (DynTypedNodeList parents = ctx.getParents(loop); !parents.empty(); parents = ctx.getParents(parents[0])) {
    const Stmt *s = parents[0].get<Stmt>();
    if (!s) return false;
    if (s == declBlock) return true;
    if (isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt>(s)) return false;
  }
  return false;
}

}  // namespace

void registerReduceMetrics(Migration &m) {
  struct State {
    std::vector<Accumulation> found;
    std::map<std::pair<const VarDecl *, const CXXForRangeStmt *>, size_t> index;
  };
  auto state = std::make_shared<State>();
  auto accumulator = varDecl(hasLocalStorage(), unless(parmVarDecl())).bind("var");
  auto ref = ignoringParenImpCasts(declRefExpr(to(accumulator)));
  auto sameVar = ignoringParenImpCasts(declRefExpr(to(varDecl(equalsBoundNode("var")))));
  auto step = stmt(anyOf(binaryOperator(hasAnyOperatorName("+=", "-="), hasLHS(ref), hasRHS(expr().bind("inc"))),
                         binaryOperator(hasOperatorName("="), hasLHS(ref),
                                        hasRHS(ignoringParenImpCasts(binaryOperator(
                                            hasOperatorName("+"), hasLHS(sameVar), hasRHS(expr().bind("inc")))))),
                         unaryOperator(hasAnyOperatorName("++", "--"), hasUnaryOperand(ref))));
  m.onMatch(stmt(step, nearestRangeFor(cxxForRangeStmt(hasRangeInit(expr(hasType(isDataLoaderType())))).bind("loop")),
                 inFunction(functionDecl().bind("fn")))
                .bind("step"),
            [&m, state](const BoundNodes &nodes) {
    const auto *var = nodes.getNodeAs<VarDecl>("var");
    const auto *loop = nodes.getNodeAs<CXXForRangeStmt>("loop");
    QualType type = var->getType();
    bool number = !type->isReferenceType() && ((type->isIntegerType() && !type->isBooleanType()) ||
                                               type->isRealFloatingType());
    const FunctionDecl *actual = declaringFunction(var);
    // A template's pattern has dependent types: its instantiations decide.
    if (!number || !actual || actual->isDependentContext() ||
        !m.sm.isBeforeInTranslationUnit(var->getLocation(), loop->getBeginLoc()))
      return;
    auto [it, added] = state->index.emplace(std::make_pair(var, loop), state->found.size());
    if (added) state->found.push_back({var, loop, nodes.getNodeAs<FunctionDecl>("fn"), {}});
    state->found[it->second].increments.push_back(nodes.getNodeAs<Expr>("inc"));
  });

  m.atEnd([&m, state] {
    RankDependence ranks = m.rankDependence();
    MetricShares shares(m.ctx, ranks);
    std::vector<const Accumulation *> reduced;
    std::vector<Share> reductions;
    for (const Accumulation &a : state->found) {
      if (m.isGatheredCount(a.var)) continue;
      Share share = Share::Unknown;
      bool first = true, agree = true;
      for (const Expr *inc : a.increments) {
        Share s = inc ? shares.of(inc) : Share::Uniform;
        agree = agree && (first || s == share);
        share = s;
        first = false;
      }
      if (!agree || (share != Share::Sum && share != Share::Mean)) continue;
      SourceLocation end = a.loop->getEndLoc();
      if (reducedAlready(a.var, *a.loop, m.ctx)) {
        m.noteReduced(a.var, end);
        continue;
      }
      if (!readAfter(a.var, end, declaringFunction(a.var), m.sm) || !resetForEachRun(a.var, *a.loop, m.ctx) ||
          !parentBlock(*a.loop, m.ctx) || ranks.rankLocalCondition(*a.loop))
        continue;
      reduced.push_back(&a);
      reductions.push_back(share);
    }
    // One line per accumulator after its loop, in the order they are declared; a template's loop once.
    std::vector<size_t> order(reduced.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return m.sm.isBeforeInTranslationUnit(reduced[a]->var->getLocation(), reduced[b]->var->getLocation());
    });
    std::map<std::pair<SourceLocation, SourceLocation>, bool> written;  // a template's loop: once, edited or not
    for (size_t i : order) {
      const Accumulation &a = *reduced[i];
      auto [it, first] = written.emplace(std::make_pair(a.var->getLocation(), a.loop->getBeginLoc()), false);
      if (first) {
        std::string name = a.var->getNameAsString();
        std::string line = name + " = accelerator.reduce(" + name + ", \"" + reductionFor(reductions[i]) + "\");";
        bool ownLine = false;
        SourceLocation at = insertionAfter(a.loop, m.sm, m.lang, ownLine);
        std::string indent = lineIndent(a.loop->getBeginLoc(), m.sm);
        it->second = at.isValid() && m.insert(at, ownLine ? indent + line + "\n" : "\n" + indent + line);
        if (it->second) m.useAccelerator(a.fn);
      }
      if (it->second) m.noteReduced(a.var, a.loop->getEndLoc());
    }
  });
}

}  // namespace accmigrate
