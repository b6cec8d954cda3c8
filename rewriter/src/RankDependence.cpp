#include "RankDependence.h"

#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/AST/StmtCXX.h>
#include <vector>

using namespace clang;

namespace accmigrate {
namespace {

const VarDecl *referencedVariable(const Expr *e) {
  const auto *ref = dyn_cast<DeclRefExpr>(e->IgnoreParens());
  return ref ? dyn_cast<VarDecl>(ref->getDecl()) : nullptr;
}

// What the body of a function does to its variables: the values written to each (initialiser,
// assigned values) and those used otherwise than read or stepped (address taken, bound to a
// reference, a class object's member called), whose writes cannot be followed.
class Writes : public RecursiveASTVisitor<Writes> {
 public:
  std::map<const VarDecl *, std::vector<const Expr *>> values;
  std::set<const VarDecl *> escaped;

  bool shouldVisitTemplateInstantiations() const { return true; }
  bool shouldVisitImplicitCode() const { return true; }

  bool VisitVarDecl(VarDecl *var) {
    std::vector<const Expr *> &written = values[var];
    if (const Expr *init = var->getInit()) written.push_back(init);
    return true;
  }
  bool VisitBinaryOperator(BinaryOperator *op) {
    if (op->isAssignmentOp()) handle(op->getLHS(), op->getRHS());
    return true;
  }
  bool VisitUnaryOperator(UnaryOperator *op) {
    if (op->isIncrementDecrementOp()) handle(op->getSubExpr(), nullptr);  // stepped by one: uniform
    return true;
  }
  bool VisitImplicitCastExpr(ImplicitCastExpr *cast) {
    if (cast->getCastKind() == CK_LValueToRValue) handle(cast->getSubExpr(), nullptr);
    return true;
  }
  bool VisitDeclRefExpr(DeclRefExpr *ref) {
    const auto *var = dyn_cast<VarDecl>(ref->getDecl());
    if (var && !handled_.count(ref)) escaped.insert(var);
    return true;
  }

 private:
  // A read, a step or (with `value`) an assignment of a variable: visited before the reference.
  void handle(const Expr *target, const Expr *value) {
    const auto *ref = dyn_cast<DeclRefExpr>(target->IgnoreParens());
    if (!ref || !isa<VarDecl>(ref->getDecl())) return;
    handled_.insert(ref);
    if (value) values[cast<VarDecl>(ref->getDecl())].push_back(value);
  }
  std::set<const DeclRefExpr *> handled_;
};

// The function whose body declares `var`, seen through lambdas (they share the enclosing function's
// variables), or null for a global or a member.
const FunctionDecl *outerFunction(const VarDecl *var) {
  for (const DeclContext *dc = var->getDeclContext(); dc; dc = dc->getParent()) {
    const auto *fn = dyn_cast<FunctionDecl>(dc);
    const auto *method = dyn_cast<CXXMethodDecl>(dc);
    if (fn && !(method && method->getParent()->isLambda())) return fn;
  }
  return nullptr;
}

// A type whose values the analysis follows: integral, bool, enum (function parameters), and floating
// point (locals, which may hold a count's average); references only as `const T&` parameters.
bool isFollowedType(const VarDecl *var) {
  QualType type = var->getType();
  bool parameter = isa<ParmVarDecl>(var);
  if (type->isReferenceType()) {
    type = type->getPointeeType();
    if (!parameter || !type.isConstQualified()) return false;
  }
  type = type.getCanonicalType();
  return type->isIntegralOrEnumerationType() || (!parameter && type->isRealFloatingType());
}

bool isAcceleratorRankQuery(const Expr *e) {
  const auto *call = dyn_cast<CXXMemberCallExpr>(e);
  return call && call->getImplicitObjectArgument() && isAccelerator(call->getImplicitObjectArgument()->getType());
}

}  // namespace

bool RankDependence::isRankLocal(const Expr *e) {
  if (!e) return false;
  e = e->IgnoreParens();
  if (isTensor(e->getType()) || isAcceleratorRankQuery(e)) return true;
  if (isa<IntegerLiteral, FloatingLiteral, CXXBoolLiteralExpr, CharacterLiteral, StringLiteral, CXXNullPtrLiteralExpr,
          UnaryExprOrTypeTraitExpr>(e))
    return false;
  if (const auto *ref = dyn_cast<DeclRefExpr>(e)) {
    if (isa<EnumConstantDecl>(ref->getDecl())) return false;
    const auto *var = dyn_cast<VarDecl>(ref->getDecl());
    if (auto made = uniformAfter_.find(var); made != uniformAfter_.end() &&
        ctx_.getSourceManager().isBeforeInTranslationUnit(made->second, ref->getLocation()))
      return false;
    return !var || !isUniformVariable(var);
  }
  // Operators and conversions are uniform when their operands are.
  if (isa<UnaryOperator, BinaryOperator, AbstractConditionalOperator, CastExpr, ExprWithCleanups,
          MaterializeTemporaryExpr>(e)) {
    for (const Stmt *child : e->children())
      if (const auto *operand = dyn_cast_or_null<Expr>(child); operand && isRankLocal(operand)) return true;
    return false;
  }
  // The size of a dataset: every process builds the same one (a prepared loader needs it), and
  // `.value()` of that optional.
  if (const auto *call = dyn_cast<CXXMemberCallExpr>(e)) {
    const CXXMethodDecl *method = call->getMethodDecl();
    const Expr *object = call->getImplicitObjectArgument();
    if (method && object && method->getIdentifier()) {
      if (method->getName() == "size" && derivesFrom(method->getParent(), "torch::data::datasets::BatchDataset"))
        return false;
      if (method->getName() == "value" && method->getParent()->getName() == "optional") return isRankLocal(object);
    }
  }
  return true;  // calls, members, constructions...: in doubt
}

bool RankDependence::isUniformVariable(const VarDecl *var) {
  if (!isFollowedType(var)) return false;
  const FunctionDecl *fn = outerFunction(var);
  if (!fn) {  // a global: uniform when it is a constant from uniform values
    const Expr *init = var->getInit();
    return var->getType().isConstQualified() && init && !isRankLocal(init);
  }
  return !rankLocalVariables(fn).count(var);
}

const std::set<const VarDecl *> &RankDependence::rankLocalVariables(const FunctionDecl *fn) {
  auto found = local_.find(fn);
  if (found != local_.end()) return found->second;  // done, or being computed (see local_)
  std::set<const VarDecl *> &local = local_[fn];
  Writes writes;
  if (fn->getBody()) writes.TraverseStmt(fn->getBody());
  local = writes.escaped;
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto &[var, values] : writes.values) {
      if (local.count(var)) continue;
      for (const Expr *value : values)
        if (isRankLocal(value)) {
          local.insert(var);  // `local` stays valid: std::map does not move its values
          changed = true;
          break;
        }
    }
  }
  return local;
}

void RankDependence::assumeUniformAfter(const VarDecl *var, SourceLocation point) { uniformAfter_[var] = point; }

const VarDecl *RankDependence::rankLocalVariable(const Expr *e) {
  if (!e) return nullptr;
  if (const VarDecl *var = referencedVariable(e); var && !isUniformVariable(var)) return var;
  for (const Stmt *child : e->children())
    if (const auto *sub = dyn_cast_or_null<Expr>(child))
      if (const VarDecl *var = rankLocalVariable(sub)) return var;
  return nullptr;
}

const Expr *RankDependence::enclosingCondition(const Stmt &s, const Stmt **body) {
  *body = nullptr;
  DynTypedNode child = DynTypedNode::create(s);
  for (DynTypedNodeList parents = ctx_.getParents(s); !parents.empty(); parents = ctx_.getParents(parents[0])) {
    const DynTypedNode &parent = parents[0];
    if (parent.get<FunctionDecl>() || parent.get<LambdaExpr>()) {
      *body = child.get<Stmt>();
      return nullptr;
    }
    const Stmt *from = child.get<Stmt>();
    child = parent;
    const Expr *condition = nullptr;
    if (const auto *ifStmt = parent.get<IfStmt>()) {
      if (!ifStmt->isConstexpr() && (from == ifStmt->getThen() || from == ifStmt->getElse()))
        condition = ifStmt->getCond();
    } else if (const auto *loop = parent.get<WhileStmt>()) {
      if (from == loop->getBody()) condition = loop->getCond();
    } else if (const auto *loop = parent.get<DoStmt>()) {
      if (from == loop->getBody()) condition = loop->getCond();
    } else if (const auto *loop = parent.get<ForStmt>()) {
      if (from == loop->getBody() || from == loop->getInc()) condition = loop->getCond();
    } else if (const auto *loop = parent.get<CXXForRangeStmt>()) {
      // A prepared loader gives every process the same number of batches.
      const Expr *range = loop->getRangeInit();
      if (from == loop->getBody() && range && !isDataLoader(range->getType())) condition = range;
    } else if (const auto *switchStmt = parent.get<SwitchStmt>()) {
      if (from == switchStmt->getBody()) condition = switchStmt->getCond();
    } else if (const auto *choice = parent.get<AbstractConditionalOperator>()) {
      if (from == choice->getTrueExpr() || from == choice->getFalseExpr()) condition = choice->getCond();
    } else if (const auto *op = parent.get<BinaryOperator>()) {
      if (op->isLogicalOp() && from == op->getRHS()) condition = op->getLHS();
    }
    if (condition && isRankLocal(condition)) return condition;
  }
  return nullptr;
}

bool RankDependence::encloses(const Stmt &outer, const Stmt &inner) {
  for (DynTypedNodeList parents = ctx_.getParents(inner); !parents.empty(); parents = ctx_.getParents(parents[0]))
    if (parents[0].get<Stmt>() == &outer) return true;
  return false;
}

namespace {

// The jumps of a function body (not of the lambdas in it), each with what it leaves: the loop or
// switch a break ends, the loop a continue restarts, the outermost loop a return/goto/throw leaves
// (null outside loops).
struct Jump {
  const Stmt *jump;
  const Stmt *leaves;
  bool restartsOnly;  // a continue: it skips what follows it in the iteration, not later iterations
};

void collectJumps(const Stmt *s, std::vector<const Stmt *> &enclosing, std::vector<Jump> &jumps) {
  if (!s || isa<LambdaExpr>(s)) return;
  auto innermost = [&](bool switches) -> const Stmt * {
    for (auto it = enclosing.rbegin(); it != enclosing.rend(); ++it)
      if (switches || !isa<SwitchStmt>(*it)) return *it;
    return nullptr;
  };
  if (isa<BreakStmt>(s)) jumps.push_back({s, innermost(true), false});
  if (isa<ContinueStmt>(s)) jumps.push_back({s, innermost(false), true});
  if (isa<ReturnStmt, GotoStmt, IndirectGotoStmt, CXXThrowExpr>(s)) {
    const Stmt *outermostLoop = nullptr;
    for (const Stmt *e : enclosing)
      if (!isa<SwitchStmt>(e)) {
        outermostLoop = e;
        break;
      }
    jumps.push_back({s, outermostLoop, false});
  }
  bool scope = isa<ForStmt, WhileStmt, DoStmt, CXXForRangeStmt, SwitchStmt>(s);
  if (scope) enclosing.push_back(s);
  for (const Stmt *child : s->children()) collectJumps(child, enclosing, jumps);
  if (scope) enclosing.pop_back();
}

}  // namespace

const Expr *RankDependence::jumpCondition(const Stmt &s, const Stmt &body) {
  std::vector<const Stmt *> enclosing;
  std::vector<Jump> jumps;
  collectJumps(&body, enclosing, jumps);
  const SourceManager &sm = ctx_.getSourceManager();
  for (const Jump &j : jumps) {
    bool before = sm.isBeforeInTranslationUnit(j.jump->getBeginLoc(), s.getBeginLoc());
    bool leavesLoopAroundS = j.leaves && encloses(*j.leaves, s);
    // A break/return that ends a loop around `s` changes how often it runs wherever it is; a
    // continue, or a return outside such loops, skips it when it comes first.
    bool skips = isa<BreakStmt>(j.jump) ? leavesLoopAroundS
                 : j.restartsOnly       ? leavesLoopAroundS && before
                                        : before || leavesLoopAroundS;
    if (!skips) continue;
    const Stmt *ignored;
    if (const Expr *condition = enclosingCondition(*j.jump, &ignored)) return condition;
  }
  return nullptr;
}

const Expr *RankDependence::rankLocalCondition(const Stmt &s) {
  const Stmt *body = nullptr;
  if (const Expr *condition = enclosingCondition(s, &body)) return condition;
  return body ? jumpCondition(s, *body) : nullptr;
}

}  // namespace accmigrate
