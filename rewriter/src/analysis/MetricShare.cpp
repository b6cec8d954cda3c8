#include "analysis/MetricShare.h"

#include "analysis/Analysis.h"
#include "analysis/TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/ADT/StringSwitch.h>
#include <functional>
#include <vector>

using namespace clang;

namespace accmigrate {

const char *reductionFor(Share share) { return share == Share::Mean ? "mean" : "sum"; }

namespace {

// The expression as written: parentheses, conversions, temporaries and copies seen through.
const Expr *bare(const Expr *e) {
  while (e) {
    e = e->IgnoreParenImpCasts();
    if (const auto *cast = dyn_cast<ExplicitCastExpr>(e)) e = cast->getSubExpr();
    else if (const auto *cleanups = dyn_cast<ExprWithCleanups>(e)) e = cleanups->getSubExpr();
    else if (const auto *temp = dyn_cast<MaterializeTemporaryExpr>(e)) e = temp->getSubExpr();
    else if (const auto *bind = dyn_cast<CXXBindTemporaryExpr>(e)) e = bind->getSubExpr();
    // A copy, or an implicit conversion (`loss / k` converts k to c10::Scalar).
    else if (const auto *construct = dyn_cast<CXXConstructExpr>(e);
             construct && construct->getNumArgs() == 1 && !isa<CXXTemporaryObjectExpr>(construct) &&
             (construct->getConstructor()->isCopyOrMoveConstructor() || !construct->getConstructor()->isExplicit()))
      e = construct->getArg(0);
    else return e;
  }
  return e;
}

bool onlyDefaultArguments(const CallExpr *call) {
  for (const Expr *arg : call->arguments())
    if (!isa<CXXDefaultArgExpr>(arg)) return false;
  return true;
}

// A loss of torch's functional API: at::nll_loss (torch::nll_loss), torch::nn::functional::cross_entropy...
bool isLossFunction(const FunctionDecl *fn) {
  if (!fn || !fn->getIdentifier()) return false;
  std::string qualified = fn->getQualifiedNameAsString();
  StringRef ns = StringRef(qualified).rsplit("::").first;
  if (ns != "at" && ns != "torch" && ns != "torch::nn::functional") return false;
  StringRef name = fn->getName();
  return name.endswith("loss") || name == "cross_entropy" || name == "binary_cross_entropy" ||
         name == "binary_cross_entropy_with_logits" || name == "kl_div";
}

// A loss module: torch::nn::CrossEntropyLoss, MSELoss, ... (their Impl classes end in LossImpl).
bool isLossModule(QualType type) {
  const CXXRecordDecl *module = moduleClass(type);
  return module && module->getName().endswith("LossImpl");
}

// The reduction that the arguments or options under `s` name: Sum, Mean (also when none is
// named: torch's losses default to the mean), or Unknown for Reduction::None (one loss per sample).
Share namedReduction(const Stmt *s) {
  bool sum = false, none = false;
  std::function<void(const Stmt *)> scan = [&](const Stmt *node) {
    if (!node) return;
    if (const auto *ref = dyn_cast<DeclRefExpr>(node)) {
      StringRef name = ref->getDecl()->getName();
      sum = sum || name == "Sum" || name == "kSum";
      none = none || name == "None" || name == "kNone";
    }
    for (const Stmt *child : node->children()) scan(child);  // default arguments are not children
  };
  scan(s);
  if (none) return Share::Unknown;
  return sum ? Share::Sum : Share::Mean;
}

Share sumOf(Share a, Share b) {
  if (a == b) return a;
  // The mean over processes of (m_i + c) is mean(m_i) + c; a sum over processes of (s_i + c) is not.
  if ((a == Share::Mean && b == Share::Uniform) || (a == Share::Uniform && b == Share::Mean)) return Share::Mean;
  return Share::Unknown;
}

Share productOf(Share a, Share b) {
  if (a == Share::Uniform) return b;
  if (b == Share::Uniform) return a;
  // A batch's mean times its number of samples is the batch's total.
  if ((a == Share::Mean && b == Share::Sum) || (a == Share::Sum && b == Share::Mean)) return Share::Sum;
  return Share::Unknown;
}

Share quotientOf(Share a, Share b) { return b == Share::Uniform ? a : Share::Unknown; }

}  // namespace

Share MetricShares::of(const Expr *e, int depth) {
  e = bare(e);
  if (!e || depth > 8) return Share::Unknown;
  if (!ranks_.isRankLocal(e)) return Share::Uniform;
  if (const auto *call = dyn_cast<CallExpr>(e)) return ofCall(call, depth);
  if (const auto *op = dyn_cast<BinaryOperator>(e)) {
    Share lhs = of(op->getLHS(), depth + 1), rhs = of(op->getRHS(), depth + 1);
    switch (op->getOpcode()) {
      case BO_Add:
      case BO_Sub: return sumOf(lhs, rhs);
      case BO_Mul: return productOf(lhs, rhs);
      case BO_Div: return quotientOf(lhs, rhs);
      default: return Share::Unknown;
    }
  }
  if (const auto *ref = dyn_cast<DeclRefExpr>(e))
    if (const auto *var = dyn_cast<VarDecl>(ref->getDecl())) return ofVariable(var, depth);
  return Share::Unknown;
}

Share MetricShares::ofCall(const CallExpr *call, int depth) {
  if (const auto *member = dyn_cast<CXXMemberCallExpr>(call)) {
    const CXXMethodDecl *method = member->getMethodDecl();
    const Expr *object = member->getImplicitObjectArgument();
    if (!method || !object || !method->getIdentifier()) return Share::Unknown;
    StringRef name = method->getName();
    // The value, converted or moved: `loss.item<float>()`, `.item().toDouble()`, `.detach().cpu()`.
    if (llvm::StringSwitch<bool>(name)
            .Cases("item", "toFloat", "toDouble", "toInt", "toLong", true)
            .Cases("detach", "cpu", "clone", "contiguous", "to", "cuda", true)
            .Default(false))
      return name == "item" && !onlyDefaultArguments(member) ? Share::Unknown : of(object, depth + 1);
    if (!isTensor(object->getType())) return Share::Unknown;
    bool whole = onlyDefaultArguments(member);  // over all elements, not along a dimension
    if (name == "mean" && whole) return Share::Mean;
    if ((name == "sum" && whole) || name == "numel") return isPerSample(object) ? Share::Sum : Share::Unknown;
    if (name == "size" && call->getNumArgs() == 1)
      if (const auto *dim = dyn_cast<IntegerLiteral>(bare(call->getArg(0))); dim && dim->getValue() == 0)
        return isPerSample(object) ? Share::Sum : Share::Unknown;
    if (name == "forward" && isLossModule(object->getType())) {
      // A loss module: its reduction is in the options it was built with.
      const VarDecl *criterion = rootVariable(object);
      if (!criterion || !criterion->hasLocalStorage() || isa<ParmVarDecl>(criterion)) return Share::Unknown;
      return criterion->hasInit() ? namedReduction(criterion->getInit()) : Share::Mean;
    }
    return Share::Unknown;
  }
  if (const auto *op = dyn_cast<CXXOperatorCallExpr>(call)) {
    if (op->getOperator() == OO_Call && op->getNumArgs() > 0 && isLossModule(op->getArg(0)->getType())) {
      const VarDecl *criterion = rootVariable(op->getArg(0));
      if (!criterion || !criterion->hasLocalStorage() || isa<ParmVarDecl>(criterion)) return Share::Unknown;
      return criterion->hasInit() ? namedReduction(criterion->getInit()) : Share::Mean;
    }
    if (op->getNumArgs() != 2) return Share::Unknown;
    Share lhs = of(op->getArg(0), depth + 1), rhs = of(op->getArg(1), depth + 1);
    switch (op->getOperator()) {
      case OO_Plus:
      case OO_Minus: return sumOf(lhs, rhs);
      case OO_Star: return productOf(lhs, rhs);
      case OO_Slash: return quotientOf(lhs, rhs);
      default: return Share::Unknown;
    }
  }
  const FunctionDecl *fn = call->getDirectCallee();
  if (!isLossFunction(fn)) return Share::Unknown;
  // The reduction is an argument after the input and the target (at::Reduction::Sum), or in the
  // functional options (F::NLLLossFuncOptions().reduction(torch::kSum)).
  Share reduction = Share::Mean;
  for (unsigned i = 2; i < call->getNumArgs(); ++i) {
    Share named = namedReduction(call->getArg(i));
    if (named != Share::Mean) reduction = named;
  }
  return reduction;
}

Share MetricShares::ofVariable(const VarDecl *var, int depth) {
  if (!var->hasLocalStorage() || isa<ParmVarDecl>(var) || !var->hasInit()) return Share::Unknown;
  if (writtenOnce(var)) return of(var->getInit(), depth + 1);
  // An accumulator: set to a value every process shares (its initializer, `group_loss = 0;`) and
  // stepped by `+=`/`-=` (or `x = x + ...`) of values of one share. Its value holds that share: for a
  // sum, only when every reset is zero (N processes adding c each count it N times).
  const FunctionDecl *fn = nullptr;
  for (const DeclContext *dc = var->getDeclContext(); dc && !fn; dc = dc->getParent()) fn = dyn_cast<FunctionDecl>(dc);
  if (!fn || !fn->getBody() || var->getType()->isReferenceType()) return Share::Unknown;
  auto refersToVar = [var](const Expr *e) {
    const auto *ref = dyn_cast_or_null<DeclRefExpr>(e ? e->IgnoreParenImpCasts() : nullptr);
    return ref && ref->getDecl() == var;
  };
  auto isZero = [](const Expr *e) {
    e = bare(e);
    if (const auto *i = dyn_cast<IntegerLiteral>(e)) return i->getValue() == 0;
    if (const auto *f = dyn_cast<FloatingLiteral>(e)) return f->getValue().isZero();
    return false;
  };
  std::vector<const Expr *> resets{var->getInit()}, steps;
  bool followed = true;
  std::function<void(const Stmt *)> scan = [&](const Stmt *st) {
    if (!st || !followed) return;
    if (const auto *op = dyn_cast<BinaryOperator>(st); op && op->isAssignmentOp() && refersToVar(op->getLHS())) {
      const auto *sum = dyn_cast<BinaryOperator>(op->getRHS()->IgnoreParenImpCasts());
      if (op->getOpcode() == BO_AddAssign || op->getOpcode() == BO_SubAssign) steps.push_back(op->getRHS());
      else if (op->getOpcode() == BO_Assign && sum && sum->getOpcode() == BO_Add && refersToVar(sum->getLHS()))
        steps.push_back(sum->getRHS());
      else if (op->getOpcode() == BO_Assign) resets.push_back(op->getRHS());
      else followed = false;
    } else if (const auto *op = dyn_cast<UnaryOperator>(st);
               op && (op->isIncrementDecrementOp() || op->getOpcode() == UO_AddrOf) && refersToVar(op->getSubExpr())) {
      followed = false;
    }
    for (const Stmt *child : st->children()) scan(child);
  };
  scan(fn->getBody());
  if (!followed || steps.empty()) return Share::Unknown;
  Share share = of(steps.front(), depth + 1);
  for (const Expr *step : steps)
    if (of(step, depth + 1) != share) return Share::Unknown;
  if (share != Share::Sum && share != Share::Mean) return Share::Unknown;
  for (const Expr *reset : resets)
    if (ranks_.isRankLocal(reset) || (share == Share::Sum && !isZero(reset))) return Share::Unknown;
  return share;
}

bool MetricShares::writtenOnce(const VarDecl *var) {
  auto found = writtenOnce_.find(var);
  if (found != writtenOnce_.end()) return found->second;
  const FunctionDecl *fn = functionOf(var);
  // functionOf gives the function as written; an instantiation's variable lives in its own body.
  for (const DeclContext *dc = var->getDeclContext(); dc; dc = dc->getParent())
    if (const auto *f = dyn_cast<FunctionDecl>(dc)) {
      fn = f;
      break;
    }
  bool once = true;
  auto refersToVar = [var](const Expr *e) {
    const auto *ref = dyn_cast_or_null<DeclRefExpr>(e ? e->IgnoreParenImpCasts() : nullptr);
    return ref && ref->getDecl() == var;
  };
  std::function<void(const Stmt *)> scan = [&](const Stmt *s) {
    if (!s || !once) return;
    if (const auto *op = dyn_cast<BinaryOperator>(s); op && op->isAssignmentOp() && refersToVar(op->getLHS()))
      once = false;
    if (const auto *op = dyn_cast<UnaryOperator>(s);
        op && (op->isIncrementDecrementOp() || op->getOpcode() == UO_AddrOf) && refersToVar(op->getSubExpr()))
      once = false;
    if (const auto *op = dyn_cast<CXXOperatorCallExpr>(s);
        op && op->isAssignmentOp() && op->getNumArgs() > 0 && refersToVar(op->getArg(0)))
      once = false;
    // A tensor changed in place: `total.add_(loss)`.
    if (const auto *call = dyn_cast<CXXMemberCallExpr>(s))
      if (const CXXMethodDecl *method = call->getMethodDecl();
          method && method->getIdentifier() && method->getName().endswith("_") &&
          refersToVar(call->getImplicitObjectArgument()))
        once = false;
    for (const Stmt *child : s->children()) scan(child);
  };
  if (fn && fn->getBody()) scan(fn->getBody());
  return writtenOnce_[var] = once;
}

bool MetricShares::isPerSample(const Expr *e, int depth) {
  e = bare(e);
  if (!e || depth > 4) return false;
  if (isBatchDerived(e, ctx_)) return true;
  bool found = false;
  std::function<void(const Stmt *)> scan = [&](const Stmt *s) {
    if (!s || found) return;
    if (const auto *ref = dyn_cast<DeclRefExpr>(s))
      if (const auto *var = dyn_cast<VarDecl>(ref->getDecl())) {
        if (isBatchDerived(ref, ctx_)) found = true;
        else if (var->hasLocalStorage() && !isa<ParmVarDecl>(var) && var->hasInit() && var->getInit() != e)
          found = isPerSample(var->getInit(), depth + 1);
      }
    for (const Stmt *child : s->children()) scan(child);
  };
  scan(e);
  return found;
}

}  // namespace accmigrate
