// gather-for-metrics (default): the shapes of a metric over an evaluation loader that it can make
// exact. Inside a range-for over a DataLoader, a local count later divided by the dataset's size,
//   correct += pred.eq(target).sum().item<int64_t>();          (also `(pred == target).sum()`)
//   test_loss += torch::nll_loss(out, y, {}, torch::Reduction::Sum).item<double>();   (any loss summed
//                                                               over the samples: MetricShare.h)
// becomes
//   correct += accelerator.gather_for_metrics(pred).eq(accelerator.gather_for_metrics(target)).sum().item<int64_t>();
// (the loss's input and target likewise). After gathering, every process compares (or sums the loss
// of) the whole batch of all processes, minus the samples the prepared loader repeats to even out the
// processes: each counts over the whole dataset exactly once, so the division by the dataset's size is
// right as written, whatever the dataset's size. Other sums are reduce-metrics' (a reduction after
// the loop, which counts the repeated samples). It costs one all-gather of the two operands per batch
// of evaluation.
// It produces gathered-counts, which reduce-metrics, dataset-size-division and the print rules consume.
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "analysis/MetricShare.h"
#include "analysis/RankDependence.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <llvm/ADT/StringRef.h>
#include <algorithm>
#include <memory>
#include <set>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

// `e` is already `accelerator.gather_for_metrics(...)` (a second run must not wrap it again).
bool isGathered(const Expr *e) {
  const auto *call = dyn_cast<CXXMemberCallExpr>(asWritten(e));
  const Expr *object = call ? call->getImplicitObjectArgument() : nullptr;
  return object && isAccelerator(object->getType()) && call->getMethodDecl() &&
         call->getMethodDecl()->getName() == "gather_for_metrics";
}

struct Candidate {
  const BinaryOperator *add;  // count += a.eq(b).sum().item<T>()
  const Expr *a, *b;
  const VarDecl *count;
  const FunctionDecl *fn;
};

}  // namespace

void registerGatherForMetrics(Migration &m) {
  // The counts and the divisions by the dataset's size, in the order found; which count a later
  // division uses is known after the traversal.
  struct State {
    std::vector<Candidate> candidates;
    std::vector<const BinaryOperator *> divisions;
  };
  auto state = std::make_shared<State>();
  // Torch's real declarations: `sum(std::optional<ScalarType> dtype = std::nullopt)` is a call with one
  // (defaulted) argument; `eq` has a Scalar and a Tensor overload; `operator==` is a free function.
  auto bare = [](auto inner) { return ignoringImplicit(ignoringParenImpCasts(ignoringImplicit(inner))); };
  auto eq = expr(anyOf(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("eq"))), argumentCountIs(1),
                                         on(expr(hasType(isTensorType())).bind("a")), hasArgument(0, expr().bind("b"))),
                       cxxOperatorCallExpr(hasOverloadedOperatorName("=="), argumentCountIs(2),
                                           hasArgument(0, expr(hasType(isTensorType())).bind("a")),
                                           hasArgument(1, expr(hasType(isTensorType())).bind("b")))));
  auto wholeSum = cxxMemberCallExpr(callee(cxxMethodDecl(hasName("sum"))),
                                    unless(hasAnyArgument(unless(cxxDefaultArgExpr()))), on(bare(eq)));
  // A loss whose reduction is a sum over the samples (checked in the callback): its input and target.
  auto loss = callExpr(callee(functionDecl(matchesName("^::(at|torch|torch::nn::functional)::[a-z_0-9]*(loss|entropy|entropy_with_logits|kl_div)$"))),
                       hasArgument(0, expr(hasType(isTensorType())).bind("a")),
                       hasArgument(1, expr(hasType(isTensorType())).bind("b")))
                  .bind("loss");
  auto value = cxxMemberCallExpr(callee(cxxMethodDecl(hasName("item"))), argumentCountIs(0),
                                 on(bare(expr(anyOf(wholeSum, loss)))));
  auto item = expr(anyOf(value, cxxMemberCallExpr(callee(cxxMethodDecl(hasAnyName("toLong", "toInt", "toDouble", "toFloat"))),
                                                  on(bare(value)))));
  auto count = varDecl(hasLocalStorage(), unless(parmVarDecl())).bind("count");
  m.onMatch(binaryOperator(hasOperatorName("+="), hasLHS(ignoringParenImpCasts(declRefExpr(to(count)))),
                           hasRHS(bare(item)),
                           nearestRangeFor(cxxForRangeStmt(hasRangeInit(expr(hasType(isDataLoaderType()))))),
                           inFunction(functionDecl().bind("fn")))
                .bind("add"),
            [&m, state](const BoundNodes &nodes) {
    const auto *add = nodes.getNodeAs<BinaryOperator>("add");
    const auto *var = nodes.getNodeAs<VarDecl>("count");
    // A count of its own: not a reference to one kept elsewhere, and a number.
    QualType type = var->getType();
    if (type->isReferenceType() || !(type->isIntegerType() || type->isRealFloatingType())) return;
    // A loss counts when it sums over the samples (Reduction::Sum): a mean is reduce-metrics' to reduce.
    if (const auto *lossCall = nodes.getNodeAs<CallExpr>("loss")) {
      RankDependence ranks = m.rankDependence();
      if (MetricShares(m.ctx, ranks).of(lossCall) != Share::Sum) return;
    }
    state->candidates.push_back(
        {add, nodes.getNodeAs<Expr>("a"), nodes.getNodeAs<Expr>("b"), var, nodes.getNodeAs<FunctionDecl>("fn")});
  });
  m.onMatch(binaryOperator(hasAnyOperatorName("/", "/="), hasRHS(datasetSize())).bind("div"),
            [state](const BoundNodes &nodes) { state->divisions.push_back(nodes.getNodeAs<BinaryOperator>("div")); });

  m.atEnd([&m, state] {
    std::set<SourceLocation> rewritten;  // a template's statement comes once per instantiation
    for (const Candidate &c : state->candidates) {
      if (rewritten.count(c.add->getBeginLoc())) continue;
      SourceLocation declared = c.count->getLocation();
      auto dividesCount = [&](const BinaryOperator *div) {
        return m.sm.isBeforeInTranslationUnit(c.add->getEndLoc(), div->getOperatorLoc()) &&
               mentionsVariable(div->getLHS(), [&](const VarDecl *v) { return v->getLocation() == declared; });
      };
      if (std::none_of(state->divisions.begin(), state->divisions.end(), dividesCount)) continue;
      bool aGathered = isGathered(c.a), bGathered = isGathered(c.b);
      if (aGathered && bGathered) {
        m.noteGatheredCount(c.count, c.add->getEndLoc());
        continue;
      }
      // One edit from a to b, so that the two operands are gathered together or not at all.
      std::string whole = m.text(SourceRange(c.a->getBeginLoc(), c.b->getEndLoc()));
      std::string a = m.text(c.a->getSourceRange()), b = m.text(c.b->getSourceRange());
      if (a.empty() || b.empty() || !llvm::StringRef(whole).startswith(a) || !llvm::StringRef(whole).endswith(b) ||
          whole.size() < a.size() + b.size())
        continue;
      std::string between = whole.substr(a.size(), whole.size() - a.size() - b.size());
      auto gather = [](const std::string &text, bool gathered) {
        return gathered ? text : "accelerator.gather_for_metrics(" + text + ")";
      };
      if (!m.replace(SourceRange(c.a->getBeginLoc(), c.b->getEndLoc()),
                     gather(a, aGathered) + between + gather(b, bGathered)))
        continue;
      rewritten.insert(c.add->getBeginLoc());
      m.useAccelerator(c.fn);
      m.noteGatheredCount(c.count, c.add->getEndLoc());
    }
  });
}

}  // namespace accmigrate
