// What a function does to its variables (their writes and escapes), which of them are rank-local
// (a fixpoint per function and mode), what parameters hold on entry, and the assumptions rules make.
#include "analysis/RankDependenceImpl.h"
#include "analysis/TorchTypes.h"

#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/AST/StmtCXX.h>
#include <functional>

namespace accmigrate {

using namespace rankdep;

std::optional<Cause> RankDependence::Impl::variableCause(const VarDecl *var, const Mode &m) {
  const FunctionDecl *fn = outerFunction(var);
  if (!fn) {  // a global or static member: uniform when a constant from uniform values
    Culprit ignored;
    if (var->isConstexpr()) return std::nullopt;
    if (var->getType().isConstQualified() && var->getInit() && !culprit(var->getInit(), Mode{}, ignored))
      return std::nullopt;
    return Cause{Cause::Recursion};  // kind unused for globals: explain() says why
  }
  const auto *set = locals(fn, m.fn == fn ? m : Mode{});
  if (!set) return Cause{Cause::Recursion};
  auto found = set->find(var);
  if (found == set->end()) return std::nullopt;
  return found->second;
}

const std::map<const VarDecl *, Cause> *RankDependence::Impl::locals(const FunctionDecl *fn, const Mode &m) {
  auto key = std::make_pair(fn, m);
  auto found = locals_.find(key);
  if (found != locals_.end()) {
    if (found->second.done || (!computing_.empty() && computing_.back() == key)) return &found->second.rankLocal;
    return nullptr;  // re-entered through another function: in doubt
  }
  Locals &set = locals_[key];  // stays valid: std::map does not move its values
  computing_.push_back(key);
  const Facts &f = facts(fn);
  for (const auto &[var, writes] : f.writes)
    for (const Write &w : writes)
      if (w.kind == Write::Escape) {
        set.rankLocal.emplace(var, Cause{Cause::Write, &w, nullptr, m});
        break;
      }
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto &[var, writes] : f.writes) {
      if (set.rankLocal.count(var)) continue;
      std::optional<Cause> cause;
      if (const auto *p = dyn_cast<ParmVarDecl>(var)) cause = parameterCause(p, m);
      for (const Write &w : writes) {
        Culprit ignored;
        if (cause) break;
        if (writeRankLocal(w, m, ignored)) cause = Cause{Cause::Write, &w, nullptr, m};
      }
      if (cause) {
        set.rankLocal.emplace(var, *cause);
        changed = true;
      }
    }
  }
  computing_.pop_back();
  set.done = true;
  return &set.rankLocal;
}

// The argument of call site `site` (a call or construction) for parameter `p`.
const Expr *RankDependence::Impl::argumentFor(const Expr *site, const ParmVarDecl *p) {
  unsigned index = p->getFunctionScopeIndex();
  if (const auto *op = dyn_cast<CXXOperatorCallExpr>(site); op && isa_and_nonnull<CXXMethodDecl>(op->getDirectCallee()))
    ++index;  // argument 0 is the object
  if (const auto *call = dyn_cast<CallExpr>(site)) return index < call->getNumArgs() ? call->getArg(index) : nullptr;
  if (const auto *construction = dyn_cast<CXXConstructExpr>(site))
    return index < construction->getNumArgs() ? construction->getArg(index) : nullptr;
  return nullptr;
}

// What a parameter holds on entry: in a summary, what it assumes; a lambda's, what its direct calls
// pass; main's, the command line; otherwise what every call in the unit passes, or, when callers
// may be elsewhere, uniform for integral, bool and enum types only.
std::optional<Cause> RankDependence::Impl::parameterCause(const ParmVarDecl *p, const Mode &m) {
  const auto *fn = dyn_cast<FunctionDecl>(p->getDeclContext());
  if (!fn) return Cause{Cause::ParameterType};
  if (isLambdaOperator(fn)) {
    const std::vector<const Expr *> &sites = callSites(fn);
    if (sites.empty()) return Cause{Cause::LambdaParameter};
    for (const Expr *site : sites) {
      const Expr *arg = argumentFor(site, p);
      Mode mode = functionAround(*site) && outerOf(functionAround(*site)) == m.fn ? m : Mode{};
      Culprit ignored;
      if (!arg || culprit(arg, mode, ignored)) return Cause{Cause::Argument, nullptr, arg, mode};
    }
    return std::nullopt;
  }
  if (m.fn == fn) {
    unsigned bit = std::min(p->getFunctionScopeIndex(), 63u);
    if ((m.localParams >> bit) & 1) return Cause{Cause::Assumed};
    return std::nullopt;
  }
  if (fn->isMain()) return std::nullopt;
  for (const Expr *site : callSites(fn)) {
    const Expr *arg = argumentFor(site, p);
    Culprit ignored;
    if (!arg || culprit(arg, Mode{}, ignored)) return Cause{Cause::Argument, nullptr, arg, Mode{}};
  }
  if (!callersUnknown(fn)) return std::nullopt;
  QualType type = p->getType();
  if (type->isReferenceType()) {
    type = type->getPointeeType();
    if (!type.isConstQualified()) return Cause{Cause::ParameterType};
  }
  type = type.getCanonicalType();
  if (type->isIntegralOrEnumerationType()) return std::nullopt;
  return Cause{Cause::ParameterType};
}

bool RankDependence::Impl::writeRankLocal(const Write &w, const Mode &m, Culprit &c) {
  switch (w.kind) {
    case Write::Value:
      return culprit(w.expr, m, c);
    case Write::Element:
      if (isDataLoader(w.expr->getType())) return blame(c, w.expr, Why::Batch);
      return culprit(w.expr, m, c);
    case Write::Escape:
      return blame(c, w.expr, Why::Doubt);
    case Write::OutArgument: {
      // What the function writes into its parameter, given which arguments are rank-local.
      const auto *call = cast<CallExpr>(w.expr);
      const FunctionDecl *def = projectDefinition(call->getDirectCallee());
      if (!def || w.index >= def->getNumParams()) return blame(c, call, Why::Doubt);
      Mode callee{def, 0, false};
      const auto *op = dyn_cast<CXXOperatorCallExpr>(call);
      unsigned first = op && isa<CXXMethodDecl>(def) ? 1 : 0;
      for (unsigned i = first; i < call->getNumArgs(); ++i) {
        Culprit ignored;
        if (culprit(call->getArg(i), m, ignored)) callee.localParams |= uint64_t(1) << std::min(i - first, 63u);
      }
      if (const auto *mc = dyn_cast<CXXMemberCallExpr>(call)) {
        Culprit ignored;
        callee.localThis = culprit(mc->getImplicitObjectArgument(), m, ignored);
      }
      const auto *set = locals(def, callee);
      if (!set || set->count(def->getParamDecl(w.index)))
        return blame(c, call, Why::ProjectCall, "`" + nameOf(def) + "`");
      std::string event;
      if (readsFiles(def) && !beforeTraining(*call, m, &event)) return blame(c, call, Why::FileAfterTraining, event);
      return false;
    }
  }
  return true;
}

bool RankDependence::Impl::assumedUniform(const VarDecl *var, const Expr *ref, const Mode &m) {
  for (const Assumption &a : assumptions_) {
    if (a.declaration != var->getLocation() || a.name != var->getNameAsString()) continue;
    if (!isBefore(sm_, a.point, ref->getBeginLoc())) continue;
    if (checkingAssumption_.count(var)) return true;  // a write after the point that reads `var` itself
    const FunctionDecl *fn = outerFunction(var);
    if (!fn) return false;
    checkingAssumption_.insert(var);
    // The inserted `t = accelerator.reduce(t)` gives a tensor a new storage: its aliases made before
    // the point no longer reach it. Other variables are written in place, through any alias.
    bool rebinds = isTensor(var->getType()) && !var->getType()->isReferenceType();
    bool holds = true;
    auto writes = facts(fn).writes.find(var);
    if (writes != facts(fn).writes.end())
      for (const Write &w : writes->second) {
        Culprit ignored;
        bool after = isBefore(sm_, a.point, w.expr->getBeginLoc());
        if (w.kind == Write::Escape ? after || !rebinds
                                    : after && writeRankLocal(w, m.fn == fn ? m : Mode{}, ignored)) {
          holds = false;
          break;
        }
      }
    checkingAssumption_.erase(var);
    if (holds) return true;
  }
  return false;
}

namespace {

// Collects a function's variables, their writes (RankDependence::Impl::use) and returned values.
class FactsCollector : public RecursiveASTVisitor<FactsCollector> {
 public:
  FactsCollector(const FunctionDecl *fn, Facts &facts,
                 std::function<std::optional<Write>(const DeclRefExpr *, const VarDecl *)> use)
      : fn_(fn), facts_(facts), use_(std::move(use)) {
    functions_.push_back(fn);
    for (const ParmVarDecl *p : fn->parameters()) facts_.writes[p];
  }
  bool shouldVisitTemplateInstantiations() const { return true; }
  bool shouldVisitImplicitCode() const { return true; }

  // A local class's methods are functions of their own.
  bool TraverseCXXRecordDecl(CXXRecordDecl *) { return true; }
  bool TraverseLambdaExpr(LambdaExpr *lambda) {
    functions_.push_back(lambda->getCallOperator());
    for (const ParmVarDecl *p : lambda->getCallOperator()->parameters()) facts_.writes[p];
    bool result = RecursiveASTVisitor::TraverseLambdaExpr(lambda);
    functions_.pop_back();
    return result;
  }
  bool VisitVarDecl(VarDecl *var) {
    if (isa<ParmVarDecl>(var) || outerFunction(var) != fn_) return true;
    std::vector<Write> &writes = facts_.writes[var];
    if (var->isCXXForRangeDecl()) return true;  // VisitCXXForRangeStmt
    if (const Expr *init = var->getInit()) writes.push_back({Write::Value, init});
    return true;
  }
  bool VisitCXXForRangeStmt(CXXForRangeStmt *loop) {
    if (const VarDecl *var = loop->getLoopVariable(); var && loop->getRangeInit())
      facts_.writes[var].push_back({Write::Element, loop->getRangeInit()});
    return true;
  }
  bool VisitDeclRefExpr(DeclRefExpr *ref) {
    const auto *var = dyn_cast<VarDecl>(ref->getDecl());
    if (!var || outerFunction(var) != fn_) return true;
    if (std::optional<Write> w = use_(ref, var)) facts_.writes[var].push_back(*w);
    return true;
  }
  bool VisitReturnStmt(ReturnStmt *ret) {
    if (const Expr *value = ret->getRetValue()) facts_.returns[functions_.back()].push_back(value);
    return true;
  }

 private:
  const FunctionDecl *fn_;
  Facts &facts_;
  std::function<std::optional<Write>(const DeclRefExpr *, const VarDecl *)> use_;
  std::vector<const FunctionDecl *> functions_;
};

}  // namespace

const Facts &RankDependence::Impl::facts(const FunctionDecl *fn) {
  auto found = facts_.find(fn);
  if (found != facts_.end()) return found->second;
  Facts &f = facts_[fn];
  FactsCollector collector(fn, f, [this](const DeclRefExpr *ref, const VarDecl *var) { return use(ref, var); });
  if (fn->getBody()) collector.TraverseStmt(fn->getBody());
  return f;
}

// How a reference to `var` uses it: a read or a step (nothing to record), a write, or an escape.
// Followed up through what keeps denoting (part of) the variable: `v.field`, `a[i]`, `*it`,
// `s[i]`, `t.view(...)`.
std::optional<Write> RankDependence::Impl::use(const DeclRefExpr *ref, const VarDecl *var) {
  const bool tensor = isTensor(var->getType());
  const Expr *cur = ref;
  for (int depth = 0; depth < 32; ++depth) {
    DynTypedNodeList parents = ctx_.getParents(*cur);
    if (parents.empty()) return std::nullopt;
    const DynTypedNode &parent = parents[0];
    if (const auto *decl = parent.get<VarDecl>()) {  // `cur` initialises `decl`: a reference bound to it
      if (!decl->getType()->isReferenceType())
        return tensor ? std::optional<Write>(Write{Write::Escape, cur}) : std::nullopt;
      // A range-for's hidden `auto&& __range`: only a non-const loop variable writes the elements.
      if (decl->isImplicit()) {
        auto loops = ctx_.getParents(*decl);
        const auto *ds = loops.empty() ? nullptr : loops[0].get<DeclStmt>();
        auto loopParents = ds ? ctx_.getParents(*ds) : DynTypedNodeList(DynTypedNode());
        const auto *loop = ds && !loopParents.empty() ? loopParents[0].get<CXXForRangeStmt>() : nullptr;
        if (loop && loop->getLoopVariable()) {
          QualType element = loop->getLoopVariable()->getType();
          if (!element->isReferenceType() || element.getNonReferenceType().isConstQualified()) return std::nullopt;
        }
        return Write{Write::Escape, cur};
      }
      if (decl->getType().getNonReferenceType().isConstQualified() && !tensor) return std::nullopt;
      return Write{Write::Escape, cur};
    }
    if (parent.get<TemplateArgumentLoc>() || parent.get<TypeLoc>()) return std::nullopt;  // a constant's use
    const Stmt *ps = parent.get<Stmt>();
    if (!ps) return Write{Write::Escape, cur};  // a constructor's member initialiser...
    if (const auto *ret = dyn_cast<ReturnStmt>(ps)) {
      const FunctionDecl *fn = functionAround(*ret);
      QualType result = fn ? fn->getReturnType() : QualType();
      if (!result.isNull() && result->isReferenceType() && !result.getNonReferenceType().isConstQualified())
        return Write{Write::Escape, cur};
      return std::nullopt;
    }
    const auto *pe = dyn_cast<Expr>(ps);
    if (!pe) return std::nullopt;  // a discarded value, a condition
    if (isa<ParenExpr, MaterializeTemporaryExpr, CXXBindTemporaryExpr, ExprWithCleanups>(pe)) {
      cur = pe;
      continue;
    }
    if (const auto *cast = dyn_cast<ImplicitCastExpr>(pe)) {
      switch (cast->getCastKind()) {
        case CK_LValueToRValue:
          return std::nullopt;
        case CK_NoOp:
        case CK_DerivedToBase:
        case CK_UncheckedDerivedToBase:
        case CK_ArrayToPointerDecay:
          cur = pe;
          continue;
        default:
          return std::nullopt;  // a conversion of a value
      }
    }
    if (isa<ExplicitCastExpr>(pe)) {
      if (!pe->isGLValue()) return std::nullopt;
      cur = pe;
      continue;
    }
    if (const auto *me = dyn_cast<MemberExpr>(pe)) {
      if (!isa<CXXMethodDecl>(me->getMemberDecl())) {  // a field: part of the variable
        cur = pe;
        continue;
      }
      auto callParents = ctx_.getParents(*me);
      const auto *mc = callParents.empty() ? nullptr : callParents[0].get<CXXMemberCallExpr>();
      const CXXMethodDecl *method = mc ? mc->getMethodDecl() : nullptr;
      if (!method) return Write{Write::Escape, cur};
      std::string name = nameOf(method);
      QualType result = method->getReturnType();
      if (tensor) {
        if (exposesStorage(name)) return Write{Write::Escape, cur};
        if (!name.empty() && name.back() == '_') return Write{Write::Value, mc};  // in place: t.add_(x)
        if (isTensor(result)) {  // a view or a new tensor: what is done with it decides
          cur = mc;
          continue;
        }
        return std::nullopt;
      }
      if (isStandardLibrary(method->getParent())) {
        if (method->isConst()) return std::nullopt;
        bool handsOut = (result->isReferenceType() || result->isPointerType()) &&
                        !result->getPointeeType().isConstQualified() && !isStream(result);
        if (handsOut) {  // v[i], v.at(i), v.front()...: the element's use decides
          cur = mc;
          continue;
        }
        return Write{Write::Value, mc};  // push_back(x), append(s), open(path), get()...
      }
      if (method->isConst() && !isTorchOrAcc(method)) return std::nullopt;
      return Write{Write::Escape, cur};
    }
    if (const auto *subscript = dyn_cast<ArraySubscriptExpr>(pe)) {
      if (subscript->getBase()->IgnoreParenImpCasts() != cur->IgnoreParenImpCasts() && subscript->getBase() != cur)
        return std::nullopt;  // the index
      cur = pe;
      continue;
    }
    if (const auto *op = dyn_cast<UnaryOperator>(pe)) {
      if (op->getOpcode() == UO_AddrOf) return Write{Write::Escape, cur};
      if (op->isIncrementDecrementOp()) return std::nullopt;  // stepped by one: uniform stays uniform
      if (op->getOpcode() == UO_Deref) {
        cur = pe;
        continue;
      }
      return std::nullopt;
    }
    if (const auto *op = dyn_cast<BinaryOperator>(pe)) {
      if (op->isAssignmentOp() && op->getLHS() == cur) return Write{Write::Value, op->getRHS()};
      if (op->isPtrMemOp()) return Write{Write::Escape, cur};
      return std::nullopt;
    }
    if (const auto *op = dyn_cast<CXXOperatorCallExpr>(pe)) {
      OverloadedOperatorKind kind = op->getOperator();
      bool isObject = op->getNumArgs() > 0 && op->getArg(0) == cur;
      if (isObject) {
        if (op->isAssignmentOp()) return Write{Write::Value, op->getArg(1)};
        if (kind == OO_PlusPlus || kind == OO_MinusMinus) return std::nullopt;
        if (kind == OO_Subscript || kind == OO_Arrow || (kind == OO_Star && op->getNumArgs() == 1)) {
          cur = pe;
          continue;
        }
        if (kind == OO_GreaterGreater && isInputStream(var->getType())) return std::nullopt;  // read alike
        if (kind == OO_LessLess && isStream(var->getType())) return Write{Write::Value, op->getArg(1)};
        if (kind == OO_Call) {
          const auto *method = dyn_cast_or_null<CXXMethodDecl>(op->getDirectCallee());
          if (method && method->getParent()->isLambda()) return std::nullopt;
          return Write{Write::Escape, cur};
        }
      }
      unsigned index = 0;
      while (index < op->getNumArgs() && op->getArg(index) != cur) ++index;
      if (kind == OO_GreaterGreater && index == 1 && isInputStream(op->getArg(0)->getType()))
        return Write{Write::Value, op};  // `in >> x`
      return argumentUse(op, index, cur, tensor);
    }
    if (const auto *call = dyn_cast<CallExpr>(pe)) {
      unsigned index = 0;
      while (index < call->getNumArgs() && call->getArg(index) != cur) ++index;
      if (index == call->getNumArgs()) return Write{Write::Escape, cur};  // the callee itself
      return argumentUse(call, index, cur, tensor);
    }
    if (const auto *construction = dyn_cast<CXXConstructExpr>(pe)) {
      unsigned index = 0;
      while (index < construction->getNumArgs() && construction->getArg(index) != cur) ++index;
      const CXXConstructorDecl *ctor = construction->getConstructor();
      if (tensor || index >= ctor->getNumParams()) return Write{Write::Escape, cur};  // a tensor copy aliases
      QualType param = ctor->getParamDecl(index)->getType();
      if (param->isReferenceType() && !param.getNonReferenceType().isConstQualified() &&
          !param->isRValueReferenceType())
        return Write{Write::Escape, cur};
      return std::nullopt;
    }
    if (isa<InitListExpr>(pe)) return tensor ? std::optional<Write>(Write{Write::Escape, cur}) : std::nullopt;
    if (isa<LambdaExpr, UnaryExprOrTypeTraitExpr, CXXTypeidExpr, CXXNoexceptExpr>(pe)) return std::nullopt;
    if (const auto *choice = dyn_cast<AbstractConditionalOperator>(pe)) {
      if (choice->getCond() == cur || !pe->isGLValue()) return std::nullopt;
      cur = pe;
      continue;
    }
    return Write{Write::Escape, cur};
  }
  return Write{Write::Escape, cur};
}

// `arg` (denoting the variable) is argument `argIndex` of `call`.
std::optional<Write> RankDependence::Impl::argumentUse(const CallExpr *call, unsigned argIndex, const Expr *arg,
                                                       bool tensor) {
  const FunctionDecl *callee = call->getDirectCallee();
  if (!callee) return Write{Write::Escape, arg};
  unsigned paramIndex = argIndex;
  if (isa<CXXOperatorCallExpr>(call) && isa<CXXMethodDecl>(callee)) --paramIndex;  // argument 0: the object
  std::string name = nameOf(callee);
  if (name == "getline" && isStandardLibrary(callee) && argIndex == 1) return Write{Write::Value, call};
  if (paramIndex >= callee->getNumParams()) return Write{Write::Escape, arg};  // variadic
  QualType param = callee->getParamDecl(paramIndex)->getType();
  bool writable =
      (param->isLValueReferenceType() || param->isPointerType()) && !param->getPointeeType().isConstQualified();
  const FunctionDecl *def = projectDefinition(callee);
  if (writable) return def ? Write{Write::OutArgument, call, paramIndex} : Write{Write::Escape, arg};
  if (!tensor) return std::nullopt;
  // A tensor shares its memory with its copies: only calls known not to write it are reads.
  const Expr *object = nullptr;
  if (const auto *mc = dyn_cast<CXXMemberCallExpr>(call)) object = mc->getImplicitObjectArgument();
  if ((isAcceleratorObject(object) && isCollectiveName(name)) ||
      (isTorchOrAcc(callee) && !name.empty() && name.back() != '_') || isa<CXXOperatorCallExpr>(call))
    return std::nullopt;
  if (def) return Write{Write::OutArgument, call, paramIndex};
  return Write{Write::Escape, arg};
}

}  // namespace accmigrate
