// gradient-accumulation: a manual gradient accumulation loop over a DataLoader (the loss divided by k,
// the optimizer stepped after every k-th batch) becomes Accelerate's:
//
//   for (auto &batch : *loader) {                 for (auto &batch : *loader) {
//                                                   auto accumulate = accelerator.accumulate(model);
//     auto loss = criterion(...) / k;                auto loss = criterion(...);
//     loss.backward();                     ->        accelerator.backward(loss);
//     if ((i + 1) % k == 0) {                        optimizer.step();
//       optimizer.step();                            optimizer.zero_grad();
//       optimizer.zero_grad();                     }
//     }
//     ++i;
//   }
//
// and the accelerator is created with `gradient_accumulation_steps(k)` (the fact accelerator-options).
// accelerator.backward divides the loss by k (the same `loss / k` as before, so the same gradients);
// between steps the models skip the all-reduce (no_sync) and acc::Optimizer's step()/zero_grad() do
// nothing. Left as it was, such a loop is correct on N processes (every backward averages the
// accumulated gradients across them) but all-reduces on every batch: every shape this rule does not
// prove equal is reported with the change to make, never rewritten.
//
// What is proven, and how:
// - The condition steps after batches k, 2k, ... counting from 1 since the counter was last set: it is
//   `X % k == R` (or `!(X % k)`), X the counter plus a constant; the counter is an integer set to one
//   constant (its initializer, resets outside the loop) and incremented once per batch (a statement of
//   the loop body, or `++i`/`i++` in the condition); from where the increment is, the counter's value
//   at the condition is start - 1 + batch (+1 when incremented before), which gives the batches on which
//   the condition holds. Accelerate steps after every k-th batch and at the end of each pass over a
//   prepared loader: the same batches when the loader's length is a multiple of k (said in a note).
// - The loss is divided by the same k once per batch before backward: in its initializer, by an
//   assignment, or `loss /= k`. The division goes; when the loss is read after backward (printed,
//   summed), `loss = loss / k;` (or the user's own statement) follows backward, so what is printed stays.
// - k is known where the accelerator is created (the start of the entry point): its value when it is a
//   compile-time constant (the name of a namespace-scope constant declared before this file's main),
//   or, for a local of main computed from argc/argv only (the same on every process), its initializer
//   evaluated there. A k known only later (a parameter, a member, a computed value) is reported.
// - accumulate() gets the models whose parameters the stepped optimizers hold (their initializers, as
//   prepare finds them), else the models the loop calls. Every zero_grad of the loop is in the `if`, and
//   no `continue`/`break`/`return` leaves a batch before it (accumulate() counts every batch begun).
// - The `if` goes when it holds only step()/zero_grad() of optimizers held by value (zero_grad is not
//   virtual: through a base pointer acc's would be skipped); otherwise its condition becomes
//   `accelerator.sync_gradients()` (true exactly on the batches that step), keeping what it guards.
//   The stepped optimizers created in sight are created as acc::Optimizer, which the runtime requires
//   with gradient_accumulation_steps > 1: the edits optimizer-declaration makes, so the rule is right alone.
// - `loss.backward()` gets the same edit the rule backward makes (merged when both run): without acc's
//   backward nothing would divide the loss any more.
// - A counter read only by the condition is removed with its increments and resets.
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "analysis/TorchTypes.h"
#include "engine/EditText.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/AST/StmtCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Lex/Lexer.h>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

AST_MATCHER(QualType, isAcceleratorType) { return isAccelerator(Node); }

// `e` without parentheses, implicit conversions and casts to arithmetic types: `static_cast<float>(k)` is k.
const Expr *bare(const Expr *e) {
  while (e) {
    const Expr *next = e->IgnoreUnlessSpelledInSource()->IgnoreParens();
    if (const auto *cast = dyn_cast<ExplicitCastExpr>(next); cast && cast->getType()->isArithmeticType())
      next = cast->getSubExpr();
    if (next == e) return e;
    e = next;
  }
  return e;
}

const VarDecl *varOf(const Expr *e) {
  const auto *ref = e ? dyn_cast<DeclRefExpr>(bare(e)) : nullptr;
  return ref ? dyn_cast<VarDecl>(ref->getDecl()) : nullptr;
}

bool contains(const Stmt *outer, const Stmt *inner, const SourceManager &sm) {
  if (!outer || !inner) return false;
  SourceRange o = outer->getSourceRange(), i = inner->getSourceRange();
  return !sm.isBeforeInTranslationUnit(i.getBegin(), o.getBegin()) &&
         !sm.isBeforeInTranslationUnit(o.getEnd(), i.getEnd());
}

// Every node of type T under `s` (s included).
template <typename T>
void collect(const Stmt *s, std::vector<const T *> &out) {
  if (!s) return;
  if (const auto *t = dyn_cast<T>(s)) out.push_back(t);
  for (const Stmt *child : s->children()) collect(child, out);
}

std::optional<int64_t> constantValue(const Expr *e, const ASTContext &ctx) {
  Expr::EvalResult result;
  if (!e || e->isValueDependent() || !e->EvaluateAsInt(result, ctx)) return std::nullopt;
  return result.Val.getInt().getExtValue();
}

// A method call named `name` on an object of a class derived from `base`.
bool isCallTo(const CXXMemberCallExpr *call, StringRef name, StringRef base) {
  const CXXMethodDecl *method = call->getMethodDecl();
  return method && method->getName() == name && derivesFrom(method->getParent(), base);
}
bool isOptimizerStep(const CXXMemberCallExpr *call) { return isCallTo(call, "step", "torch::optim::Optimizer"); }
bool isTensorBackward(const CXXMemberCallExpr *call) { return isCallTo(call, "backward", "at::TensorBase"); }
bool isZeroGrad(const CXXMemberCallExpr *call) {
  return isCallTo(call, "zero_grad", "torch::optim::Optimizer") || isCallTo(call, "zero_grad", "torch::nn::Module");
}

// The variable or member (of `this`) a call's object names: `optimizer` in `optimizer.step()`, `opt->step()`.
const ValueDecl *objectDecl(const CXXMemberCallExpr *call) {
  const Expr *object = call->getImplicitObjectArgument();
  if (!object) return nullptr;
  object = object->IgnoreParenImpCasts();
  if (const auto *op = dyn_cast<CXXOperatorCallExpr>(object); op && op->getOperator() == OO_Arrow)
    object = op->getArg(0)->IgnoreParenImpCasts();
  if (const auto *unary = dyn_cast<UnaryOperator>(object); unary && unary->getOpcode() == UO_Deref)
    object = unary->getSubExpr()->IgnoreParenImpCasts();
  if (const auto *ref = dyn_cast<DeclRefExpr>(object)) return ref->getDecl();
  if (const auto *member = dyn_cast<MemberExpr>(object))
    if (isa<CXXThisExpr>(member->getBase()->IgnoreParenImpCasts())) return member->getMemberDecl();
  return nullptr;
}

// --- k, the number of batches accumulated ---------------------------------------------------------

// Calls that only convert argv's strings (no state, same result every time).
bool isPureConversion(const FunctionDecl *fn) {
  static const std::set<std::string> names = {"stoi",    "stol",    "stoll",    "stoul", "stoull", "stof",
                                              "stod",    "atoi",    "atol",     "atoll", "atof",   "strtol",
                                              "strtoll", "strtoul", "strtoull", "max",   "min"};
  if (!fn || !names.count(fn->getNameAsString())) return false;
  return fn->isInStdNamespace() || fn->getDeclContext()->getRedeclContext()->isTranslationUnit();
}

// `e` is computed only from literals, main's parameters and pure conversions of them.
bool onlyFromMainArguments(const Stmt *s, const FunctionDecl *main) {
  if (!s) return true;
  if (const auto *ref = dyn_cast<DeclRefExpr>(s)) {
    const auto *parm = dyn_cast<ParmVarDecl>(ref->getDecl());
    if (parm) return parm->getDeclContext() == main;
    if (isa<EnumConstantDecl>(ref->getDecl())) return true;
    return isa<FunctionDecl>(ref->getDecl()) && isPureConversion(cast<FunctionDecl>(ref->getDecl()));
  }
  if (const auto *call = dyn_cast<CallExpr>(s)) {
    if (!isPureConversion(call->getDirectCallee())) return false;
  } else if (const auto *unary = dyn_cast<UnaryOperator>(s)) {
    if (unary->isIncrementDecrementOp() || unary->getOpcode() == UO_AddrOf) return false;
  } else if (const auto *binary = dyn_cast<BinaryOperator>(s)) {
    if (binary->isAssignmentOp()) return false;
  } else if (const auto *construct = dyn_cast<CXXConstructExpr>(s)) {
    const CXXRecordDecl *rd = construct->getConstructor()->getParent();
    if (!rd->isInStdNamespace() || rd->getName() != "basic_string") return false;
  } else if (!(isa<IntegerLiteral>(s) || isa<StringLiteral>(s) || isa<FloatingLiteral>(s) || isa<CharacterLiteral>(s) ||
               isa<CXXBoolLiteralExpr>(s) || isa<ImplicitCastExpr>(s) || isa<ExplicitCastExpr>(s) ||
               isa<ParenExpr>(s) || isa<ConditionalOperator>(s) || isa<ArraySubscriptExpr>(s) ||
               isa<MaterializeTemporaryExpr>(s) || isa<ExprWithCleanups>(s) || isa<CXXBindTemporaryExpr>(s) ||
               isa<CXXDefaultArgExpr>(s) || isa<CXXNullPtrLiteralExpr>(s))) {
    return false;
  }
  for (const Stmt *child : s->children())
    if (!onlyFromMainArguments(child, main)) return false;
  return true;
}

// Every mention of `var` in `body` reads it (an rvalue), or, for a pointer, reads through it (`argv[i]`).
bool onlyRead(const VarDecl *var, const Stmt *body, ASTContext &ctx) {
  std::vector<const DeclRefExpr *> refs;
  collect(body, refs);
  for (const DeclRefExpr *ref : refs) {
    if (ref->getDecl() != var) continue;
    DynTypedNodeList parents = ctx.getParents(*ref);
    const auto *cast = parents.empty() ? nullptr : parents[0].get<ImplicitCastExpr>();
    if (!cast || cast->getCastKind() != CK_LValueToRValue) return false;
    if (var->getType()->isPointerType()) {
      DynTypedNodeList grand = ctx.getParents(*cast);
      const auto *subscript = grand.empty() ? nullptr : grand[0].get<ArraySubscriptExpr>();
      if (!subscript || subscript->getBase()->IgnoreParenImpCasts() != ref) return false;
    }
  }
  return true;
}

struct Steps {
  const Expr *expr = nullptr;    // as written in the condition
  const VarDecl *var = nullptr;  // when it names a variable
  std::optional<int64_t> value;  // when known at compile time
  std::string option;            // what gradient_accumulation_steps(...) gets; empty: not nameable there
};

// A namespace-scope or static member constant declared in this file before its main: nameable at main's start.
bool visibleAtMain(const VarDecl *var, Migration &m) {
  if (!var->hasGlobalStorage() || var->isLocalVarDecl()) return false;
  for (const Decl *d : m.ctx.getTranslationUnitDecl()->decls())
    if (const auto *fn = dyn_cast<FunctionDecl>(d); fn && fn->isMain() && fn->isThisDeclarationADefinition())
      return m.sm.isWrittenInMainFile(fn->getLocation()) && m.sm.isWrittenInMainFile(var->getLocation()) &&
             m.sm.isBeforeInTranslationUnit(var->getLocation(), fn->getLocation());
  return false;
}

// `e` is a constant expression whose variables are all nameable at main's start: its text can be written there.
bool nameableAtMain(const Expr *e, Migration &m) {
  if (!constantValue(e, m.ctx)) return false;
  std::vector<const DeclRefExpr *> refs;
  collect(e, refs);
  for (const DeclRefExpr *ref : refs) {
    const auto *var = dyn_cast<VarDecl>(ref->getDecl());
    if (!isa<EnumConstantDecl>(ref->getDecl()) && !(var && visibleAtMain(var, m))) return false;
  }
  return !m.text(e->getSourceRange()).empty();
}

Steps resolveSteps(const Expr *k, const FunctionDecl *fn, Migration &m) {
  Steps steps;
  steps.expr = k;
  steps.var = varOf(k);
  steps.value = constantValue(k, m.ctx);
  const VarDecl *var = steps.var;
  bool unchanged = var && var->isLocalVarDecl() && var->hasInit() &&
                   (var->getType().isConstQualified() || onlyRead(var, fn->getBody(), m.ctx));
  if (!steps.value && unchanged) steps.value = constantValue(var->getInit(), m.ctx);
  if (steps.value) {
    if (*steps.value < 1) return steps;  // a modulo by it is undefined
    // Its name where main sees it (`kAccumulation`, or a local's `= kAccumulation`), else its value.
    if (nameableAtMain(k, m))
      steps.option = m.text(k->getSourceRange());
    else if (unchanged && nameableAtMain(var->getInit(), m))
      steps.option = m.text(var->getInit()->getSourceRange());
    else
      steps.option = std::to_string(*steps.value);
    return steps;
  }
  // A local of main computed from argc/argv, which every process gets alike: evaluated again where the
  // accelerator is created, at main's start, while main's parameters still hold what they held at first.
  if (unchanged && fn->isMain() && onlyFromMainArguments(var->getInit(), fn)) {
    bool parametersRead = true;
    for (const ParmVarDecl *parm : fn->parameters()) parametersRead &= onlyRead(parm, fn->getBody(), m.ctx);
    std::string init = m.text(var->getInit()->getSourceRange());
    if (parametersRead && !init.empty()) steps.option = init;
  }
  return steps;
}

// Both mean the same k: the same variable, or the same constant.
bool sameSteps(const Expr *e, const Steps &steps, const ASTContext &ctx) {
  if (const VarDecl *var = varOf(e); var && var == steps.var) return true;
  std::optional<int64_t> value = constantValue(bare(e), ctx);
  return value && steps.value && *value == *steps.value;
}

// --- the condition: X % k == R over a batch counter ----------------------------------------------

// a*k + c*counter + constant, with the increment of the counter met on the way (`++i`, `i++`).
struct Linear {
  int64_t k = 0, counter = 0, constant = 0;
  const UnaryOperator *increment = nullptr;
};

std::optional<Linear> linear(const Expr *e, const Steps &steps, const VarDecl *&counter, const ASTContext &ctx) {
  e = bare(e);
  Linear out;
  if (steps.var && varOf(e) == steps.var) {
    out.k = 1;
    return out;
  }
  if (const auto *unary = dyn_cast<UnaryOperator>(e); unary && unary->isIncrementOp()) {
    const VarDecl *var = varOf(unary->getSubExpr());
    if (!var || (counter && counter != var)) return std::nullopt;
    counter = var;
    out.counter = 1;
    out.increment = unary;
    return out;
  }
  if (const auto *binary = dyn_cast<BinaryOperator>(e);
      binary && (binary->getOpcode() == BO_Add || binary->getOpcode() == BO_Sub)) {
    std::optional<Linear> l = linear(binary->getLHS(), steps, counter, ctx);
    std::optional<Linear> r = linear(binary->getRHS(), steps, counter, ctx);
    if (!l || !r || (l->increment && r->increment)) return std::nullopt;
    int64_t sign = binary->getOpcode() == BO_Add ? 1 : -1;
    out.k = l->k + sign * r->k;
    out.counter = l->counter + sign * r->counter;
    out.constant = l->constant + sign * r->constant;
    out.increment = l->increment ? l->increment : r->increment;
    return out;
  }
  if (std::optional<int64_t> value = constantValue(e, ctx)) {
    out.constant = *value;
    return out;
  }
  const VarDecl *var = varOf(e);
  if (!var || !var->getType()->isIntegerType() || (counter && counter != var)) return std::nullopt;
  counter = var;
  out.counter = 1;
  return out;
}

struct Modulo {
  const Expr *dividend = nullptr, *divisor = nullptr, *remainder = nullptr;  // remainder null: 0
};

// `X % k == R`, `R == X % k`, `!(X % k)`.
std::optional<Modulo> moduloTest(const Expr *cond) {
  cond = bare(cond);
  auto rem = [](const Expr *e) {
    const auto *op = dyn_cast<BinaryOperator>(bare(e));
    return op && op->getOpcode() == BO_Rem ? op : nullptr;
  };
  if (const auto *unary = dyn_cast<UnaryOperator>(cond); unary && unary->getOpcode() == UO_LNot)
    if (const BinaryOperator *op = rem(unary->getSubExpr())) return Modulo{op->getLHS(), op->getRHS(), nullptr};
  if (const auto *eq = dyn_cast<BinaryOperator>(cond); eq && eq->getOpcode() == BO_EQ) {
    if (const BinaryOperator *op = rem(eq->getLHS())) return Modulo{op->getLHS(), op->getRHS(), eq->getRHS()};
    if (const BinaryOperator *op = rem(eq->getRHS())) return Modulo{op->getLHS(), op->getRHS(), eq->getLHS()};
  }
  return std::nullopt;
}

bool hasRemainder(const Stmt *s) {
  std::vector<const BinaryOperator *> ops;
  collect(s, ops);
  return std::any_of(ops.begin(), ops.end(), [](const BinaryOperator *op) { return op->getOpcode() == BO_Rem; });
}

// --- the loss and its division by k -----------------------------------------------------------------

// `n / d` or `n.div(d)` on a tensor.
bool division(const Expr *e, const Expr *&numerator, const Expr *&divisor) {
  e = e ? e->IgnoreUnlessSpelledInSource()->IgnoreParens() : nullptr;
  if (const auto *op = dyn_cast_or_null<CXXOperatorCallExpr>(e);
      op && op->getOperator() == OO_Slash && op->getNumArgs() == 2 && isTensor(op->getArg(0)->getType())) {
    numerator = op->getArg(0), divisor = op->getArg(1);
    return true;
  }
  if (const auto *call = dyn_cast_or_null<CXXMemberCallExpr>(e);
      call && isCallTo(call, "div", "at::TensorBase") && call->getNumArgs() == 1) {
    numerator = call->getImplicitObjectArgument(), divisor = call->getArg(0);
    return true;
  }
  return false;
}

// `loss = <rhs>` (operator= of a tensor) or `loss /= d`, `loss.div_(d)`: the variable and the other operand.
struct Write {
  enum Kind { None, Assign, DivideInPlace, Other } kind = None;
  const Expr *operand = nullptr;
};

Write writeOf(const Stmt *stmt, const VarDecl *loss) {
  const auto *e = dyn_cast<Expr>(stmt);
  if (!e) return {};
  e = e->IgnoreUnlessSpelledInSource();
  if (const auto *op = dyn_cast<CXXOperatorCallExpr>(e); op && op->getNumArgs() == 2 && varOf(op->getArg(0)) == loss) {
    if (op->getOperator() == OO_Equal) return {Write::Assign, op->getArg(1)};
    if (op->getOperator() == OO_SlashEqual) return {Write::DivideInPlace, op->getArg(1)};
    if (op->isAssignmentOp()) return {Write::Other, nullptr};
  }
  if (const auto *call = dyn_cast<CXXMemberCallExpr>(e); call && varOf(call->getImplicitObjectArgument()) == loss &&
                                                         call->getMethodDecl() &&
                                                         call->getMethodDecl()->getName().endswith("_")) {
    if (call->getMethodDecl()->getName() == "div_" && call->getNumArgs() == 1)
      return {Write::DivideInPlace, call->getArg(0)};
    return {Write::Other, nullptr};
  }
  return {};
}

// --- one loop --------------------------------------------------------------------------------------

// What the rewrite of one loop does, made once every loop of the unit is known (one k per accelerator).
struct Plan {
  std::string option;  // gradient_accumulation_steps(...)
  const IfStmt *step;
  std::function<void()> apply;
};

class LoopAnalysis {
 public:
  LoopAnalysis(Migration &m, const IfStmt *step, const Stmt *loop, const FunctionDecl *fn, bool unitHasAccelerator)
      : m_(m), step_(step), loop_(loop), fn_(fn), unitHasAccelerator_(unitHasAccelerator) {}

  std::optional<Plan> run();

 private:
  bool analyse();
  bool fail(const std::string &why, const std::string &fix);
  std::string howTo() const;
  std::string counterFix() const;
  bool findBackward();
  bool findDivision();
  bool checkCounter(const Modulo &modulo, const Linear &dividend);
  bool checkZeroGradAndSteps();
  bool checkJumps();
  void findModels();
  int indexOf(const Stmt *s) const;
  std::string statementText(const Stmt *s) const {
    return Lexer::getSourceText(statementRange(s, m_.sm, m_.lang), m_.sm, m_.lang).str();
  }
  std::string guardName() const;
  bool unwrapsStep() const;
  void wrapOptimizer(const ValueDecl *optimizer);
  void rewrite();

  Migration &m_;
  const IfStmt *step_;
  const Stmt *loop_;
  const FunctionDecl *fn_;
  bool unitHasAccelerator_;
  bool quiet_ = false;  // only asking whether the shape is there: no finding
  const CompoundStmt *body_ = nullptr;
  std::string condition_;  // as written
  Steps steps_;
  std::string stepsText_ = "k";  // how findings spell k

  const CXXMemberCallExpr *backward_ = nullptr;
  const Stmt *backwardStmt_ = nullptr;
  const VarDecl *loss_ = nullptr;
  const Stmt *divisionStmt_ = nullptr;  // the statement of the body that divides
  const Expr *division_ = nullptr;      // `n / k` to replace by n (initializer or assignment)
  const Expr *numerator_ = nullptr;
  const Expr *divisor_ = nullptr;
  bool divisionIsStatement_ = false;  // `loss = loss / k;`, `loss /= k;`: the statement goes
  bool readAfterBackward_ = false;

  const VarDecl *counter_ = nullptr;
  const UnaryOperator *conditionIncrement_ = nullptr;
  std::vector<const Stmt *> counterStatements_;  // its increment and resets, whole statements
  const DeclStmt *counterDecl_ = nullptr;
  bool counterReadElsewhere_ = false;

  std::vector<const ValueDecl *> optimizers_;
  std::vector<const ValueDecl *> models_;
};

bool LoopAnalysis::fail(const std::string &why, const std::string &fix) {
  if (quiet_) return false;
  m_.report(step_->getBeginLoc(),
            "manual gradient accumulation (the optimizer steps under `" + condition_ + "`) left as is: " + why +
                "; it is correct on N processes, but every batch all-reduces the gradients",
            fix);
  return false;
}

// The lines that make the loop Accelerate's, for findings.
std::string LoopAnalysis::howTo() const {
  std::string models;
  for (const ValueDecl *model : models_) models += (models.empty() ? "" : ", ") + model->getNameAsString();
  if (models.empty()) models = "<the models the optimizer trains>";
  return "by hand: create the accelerator with `acc::AcceleratorOptions().gradient_accumulation_steps(" + stepsText_ +
         ")`, start the loop body with `auto accumulate = accelerator.accumulate(" + models +
         ");`, drop the division of the loss by " + stepsText_ +
         " (accelerator.backward divides by it) and step under `if (accelerator.sync_gradients())`";
}

int LoopAnalysis::indexOf(const Stmt *s) const {
  const Stmt *child = childOfBlockContaining(body_, s);
  int i = 0;
  for (const Stmt *stmt : body_->body()) {
    if (stmt == child) return i;
    ++i;
  }
  return -1;
}

std::optional<Plan> LoopAnalysis::run() {
  if (!analyse()) return std::nullopt;
  Plan plan;
  plan.option = "gradient_accumulation_steps(" + steps_.option + ")";
  plan.step = step_;
  plan.apply = [this] { rewrite(); };
  return plan;
}

bool LoopAnalysis::analyse() {
  condition_ = m_.text(step_->getCond()->getSourceRange());
  if (condition_.empty()) return false;  // a macro: nothing to say
  // Gradients computed under the condition too (a GAN's generator every n_critic batches): no accumulation.
  std::vector<const CXXMemberCallExpr *> guarded;
  collect(step_->getThen(), guarded);
  for (const CXXMemberCallExpr *call : guarded)
    if (const CXXMethodDecl *method = call->getMethodDecl(); method && method->getName() == "backward") return false;
  const auto *rangeFor = dyn_cast<CXXForRangeStmt>(loop_);
  bool overLoader = rangeFor && rangeFor->getRangeInit() && isDataLoader(rangeFor->getRangeInit()->getType());
  body_ = rangeFor ? dyn_cast<CompoundStmt>(rangeFor->getBody()) : nullptr;
  findModels();

  if (!hasRemainder(step_->getCond())) {
    // A step under another condition is accumulation only if the loss is divided by an integer.
    quiet_ = true;
    bool divided =
        overLoader && body_ && findBackward() && findDivision() && bare(divisor_)->getType()->isIntegerType();
    quiet_ = false;
    if (!divided) return false;
    stepsText_ = m_.text(divisor_->getSourceRange());
    return fail("the loss is divided by `" + stepsText_ + "`, but the condition is not a step after every " +
                    stepsText_ + "-th batch (`(i + 1) % " + stepsText_ +
                    " == 0`, i counting the loader's batches from 0)",
                "if it is one, write it so; then acc-migrate rewrites the loop; " + howTo());
  }
  std::optional<Modulo> modulo = moduloTest(step_->getCond());
  std::vector<const BinaryOperator *> remainders;
  collect(step_->getCond(), remainders);
  for (const BinaryOperator *op : remainders)
    if (op->getOpcode() == BO_Rem && !m_.text(op->getRHS()->getSourceRange()).empty()) {
      stepsText_ = m_.text(op->getRHS()->getSourceRange());  // how findings spell k
      break;
    }
  if (!overLoader || !body_)
    return fail(
        "the loop does not iterate a DataLoader, and accelerator.accumulate also steps at the end of each "
        "pass over a prepared loader",
        "iterate the data through `accelerator.prepare_data_loader(...)` (a torch Dataset), then " + howTo());
  if (step_->getElse() || step_->getInit() || step_->getConditionVariable() || parentBlock(*step_, m_.ctx) != body_)
    return fail("the `if` that steps is not a plain statement of the loop body (no else, no declaration)",
                "make it one; then acc-migrate rewrites the loop; " + howTo());
  if (!modulo)
    return fail("the condition is not `X % " + stepsText_ + " == R` or `!(X % " + stepsText_ + ")`",
                "write `(i + 1) % " + stepsText_ +
                    " == 0`, i counting the loader's batches from 0; then acc-migrate rewrites the loop; " + howTo());

  steps_ = resolveSteps(modulo->divisor, fn_, m_);
  const VarDecl *counter = nullptr;
  std::optional<Linear> x = linear(modulo->dividend, steps_, counter, m_.ctx);
  if (!x || !counter || x->counter != 1 || (x->k && !steps_.value))
    return fail("`" + m_.text(modulo->dividend->getSourceRange()) + "` is not a batch counter plus a constant",
                counterFix());
  counter_ = counter;
  conditionIncrement_ = x->increment;
  if (!checkCounter(*modulo, *x)) return false;
  if (steps_.value && *steps_.value < 1) return false;  // `% 0`: undefined, not accumulation
  if (steps_.option.empty())
    return fail("`" + stepsText_ +
                    "` is not known where the accelerator is created (the start of the program's entry point): a "
                    "compile-time constant is, and so is, in main, a value computed from argc/argv only",
                "compute it before the accelerator and create it with it; " + howTo());
  if (!findBackward() || !findDivision() || !checkZeroGradAndSteps() || !checkJumps()) return false;
  if (models_.empty())
    return fail("no model found whose parameters the optimizer holds, or that the loop calls", howTo());
  // Last, so that a loop left as is for its shape is reported alike when migrated code is seen again.
  if (unitHasAccelerator_)
    return fail("this file already creates an acc::Accelerator, which acc-migrate does not change",
                "create it with `acc::AcceleratorOptions().gradient_accumulation_steps(" + steps_.option + ")`, then " +
                    howTo());
  return true;
}

std::string LoopAnalysis::counterFix() const {
  return "count the batches in an integer `i` set to 0 before the loop and incremented once per batch, and write "
         "`(i + 1) % " +
         stepsText_ + " == 0`; then acc-migrate rewrites the loop; " + howTo();
}

// Exactly one backward in the loop, a statement of its body, on a local tensor of the body.
bool LoopAnalysis::findBackward() {
  std::vector<const CXXMemberCallExpr *> calls;
  collect(body_, calls);
  backward_ = nullptr;
  // accelerator.backward(loss): a loop left as is on a first run, seen again (its findings stay).
  auto onAccelerator = [](const CXXMemberCallExpr *call) {
    const CXXMethodDecl *method = call->getMethodDecl();
    return method && method->getName() == "backward" && call->getNumArgs() >= 1 && call->getImplicitObjectArgument() &&
           isAccelerator(call->getImplicitObjectArgument()->getType());
  };
  for (const CXXMemberCallExpr *call : calls) {
    if (!isTensorBackward(call) && !onAccelerator(call)) continue;
    if (backward_) return fail("the loop calls backward more than once", howTo());
    backward_ = call;
  }
  if (!backward_) return fail("the loop calls no tensor's backward", howTo());
  const auto *member = dyn_cast<MemberExpr>(backward_->getCallee()->IgnoreParens());
  bool migrated = onAccelerator(backward_);
  loss_ = varOf(migrated ? backward_->getArg(0) : backward_->getImplicitObjectArgument());
  backwardStmt_ = childOfBlockContaining(body_, backward_);
  bool declaredInBody = loss_ && loss_->isLocalVarDecl() &&
                        m_.sm.isBeforeInTranslationUnit(body_->getLBracLoc(), loss_->getLocation()) &&
                        m_.sm.isBeforeInTranslationUnit(loss_->getLocation(), body_->getRBracLoc());
  if (!member || (member->isArrow() && !migrated) || !declaredInBody || !isExpressionStatement(*backward_, m_.ctx) ||
      parentBlock(*backward_, m_.ctx) != body_)
    return fail(
        "backward is not called as a statement of the loop body on a tensor declared in it "
        "(`auto loss = ...; loss.backward();`)",
        howTo());
  return true;
}

// The loss divided by k once before backward: in its initializer, by `loss = <expr> / k;` or `loss /= k;`.
bool LoopAnalysis::findDivision() {
  const DeclStmt *lossDecl = nullptr;
  for (const Stmt *stmt : body_->body())
    if (const auto *decl = dyn_cast<DeclStmt>(stmt))
      for (const Decl *d : decl->decls())
        if (d == loss_) lossDecl = decl;
  if (!lossDecl)
    return fail(
        "backward is not called as a statement of the loop body on a tensor declared in it "
        "(`auto loss = ...; loss.backward();`)",
        howTo());
  int declIndex = indexOf(lossDecl), backwardIndex = indexOf(backwardStmt_);
  // Each division found: the statement, the expression to replace by its numerator (null: the statement
  // goes), the numerator and the divisor.
  struct Found {
    const Stmt *stmt;
    const Expr *whole, *numerator, *divisor;
  };
  std::vector<Found> found;
  const Expr *numerator = nullptr, *divisor = nullptr;
  if (const Expr *init = loss_->getInit(); init && division(init, numerator, divisor))
    found.push_back({lossDecl, init->IgnoreUnlessSpelledInSource()->IgnoreParens(), numerator, divisor});
  bool otherWrite = false;
  int i = 0;
  for (const Stmt *stmt : body_->body()) {
    int index = i++;
    if (index <= declIndex) continue;
    Write write = writeOf(stmt, loss_);
    if (write.kind == Write::None) continue;
    if (index > backwardIndex || write.kind == Write::Other)
      otherWrite = true;
    else if (write.kind == Write::DivideInPlace)
      found.push_back({stmt, nullptr, nullptr, write.operand});
    else if (!division(write.operand, numerator, divisor))
      otherWrite = true;
    else if (varOf(numerator) == loss_)
      found.push_back({stmt, nullptr, nullptr, divisor});  // loss = loss / k;
    else
      found.push_back({stmt, write.operand->IgnoreUnlessSpelledInSource()->IgnoreParens(), numerator, divisor});
  }
  if (found.size() == 1) {
    divisionStmt_ = found[0].stmt, division_ = found[0].whole, numerator_ = found[0].numerator;
    divisor_ = found[0].divisor, divisionIsStatement_ = !found[0].whole;
  }
  if (!steps_.expr) return divisor_ && !otherWrite;  // only asked whether there is one
  if (!divisor_ || !sameSteps(divisor_, steps_, m_.ctx))
    return fail("the loss is not divided by " + stepsText_ + " (once, before backward): the gradients of " +
                    stepsText_ + " batches are summed, or scaled by hand",
                "to keep that sum with accelerator.accumulate, which divides the loss by " + stepsText_ +
                    ", write `accelerator.backward(" + loss_->getNameAsString() + " * " + stepsText_ + ")`; " +
                    howTo());
  std::string written = "`" + loss_->getNameAsString() + "` is written besides its division by " + stepsText_ +
                        ", read between that division and backward, or const and read after backward";
  if (otherWrite) return fail(written, howTo());
  // Reads between the division and backward would see the loss undivided; reads after backward see it
  // divided again.
  std::vector<const DeclRefExpr *> refs;
  collect(body_, refs);
  for (const DeclRefExpr *ref : refs) {
    if (ref->getDecl() != loss_ || contains(divisionStmt_, ref, m_.sm) || contains(backward_, ref, m_.sm)) continue;
    int index = indexOf(ref);
    if (index > indexOf(divisionStmt_) && index <= backwardIndex) return fail(written, howTo());
    if (index > backwardIndex) readAfterBackward_ = true;
  }
  if (readAfterBackward_ && loss_->getType().isConstQualified()) return fail(written, howTo());
  return true;
}

// The counter: an integer declared outside the loop, set only to its starting value outside it and
// incremented once per batch inside it; the condition then holds after batches k, 2k, ... (from 1).
bool LoopAnalysis::checkCounter(const Modulo &modulo, const Linear &dividend) {
  const VarDecl *c = counter_;
  std::string name = c->getNameAsString();
  std::string counterFix = this->counterFix();
  std::optional<int64_t> start = c->hasInit() ? constantValue(c->getInit(), m_.ctx) : std::nullopt;
  if (!c->getType()->isIntegerType() || !c->isLocalVarDecl() || !start || contains(body_, c->getInit(), m_.sm))
    return fail("`" + name + "` is not a local integer set to a constant before the loop", counterFix);
  std::string changes = "`" + name +
                        "` changes other than by one increment per batch (a statement of the loop body, "
                        "or `++" +
                        name + "` in the condition) and resets to its starting value outside the loop";

  // Every mention of the counter in the function: increments, resets, reads.
  std::vector<const DeclRefExpr *> refs;
  collect(fn_->getBody(), refs);
  std::vector<const Expr *> increments;
  int incrementsBefore = -1;  // 1: the counter is incremented before the condition reads it
  for (const DeclRefExpr *ref : refs) {
    if (ref->getDecl() != c) continue;
    const Stmt *child = ref;
    DynTypedNodeList parents = m_.ctx.getParents(*child);
    while (!parents.empty() && parents[0].get<ParenExpr>()) {
      child = parents[0].get<ParenExpr>();
      parents = m_.ctx.getParents(*child);
    }
    const Stmt *parent = parents.empty() ? nullptr : parents[0].get<Stmt>();
    const Expr *write = nullptr;
    bool increment = false;
    std::optional<int64_t> reset;
    if (const auto *unary = dyn_cast_or_null<UnaryOperator>(parent); unary && unary->isIncrementDecrementOp()) {
      write = unary, increment = unary->isIncrementOp();
    } else if (const auto *assign = dyn_cast_or_null<BinaryOperator>(parent);
               assign && assign->isAssignmentOp() && assign->getLHS()->IgnoreParens() == ref) {
      write = assign;
      std::optional<int64_t> rhs = constantValue(assign->getRHS(), m_.ctx);
      const auto *sum = dyn_cast<BinaryOperator>(bare(assign->getRHS()));
      if (assign->getOpcode() == BO_AddAssign)
        increment = rhs && *rhs == 1;
      else if (assign->getOpcode() == BO_Assign && rhs)
        reset = rhs;
      else if (assign->getOpcode() == BO_Assign && sum && sum->getOpcode() == BO_Add) {
        const Expr *l = sum->getLHS(), *r = sum->getRHS();
        std::optional<int64_t> lv = constantValue(l, m_.ctx), rv = constantValue(r, m_.ctx);
        increment = (varOf(l) == c && rv && *rv == 1) || (varOf(r) == c && lv && *lv == 1);
      }
    } else if (const auto *cast = dyn_cast_or_null<ImplicitCastExpr>(parent);
               cast && cast->getCastKind() == CK_LValueToRValue) {
      // A read; those inside `c = c + 1` belong to the increment.
      bool inIncrement = false;
      for (const Expr *inc : increments) inIncrement |= contains(inc, ref, m_.sm);
      DynTypedNodeList up = m_.ctx.getParents(*cast);
      for (int depth = 0; !up.empty() && depth < 4; ++depth) {
        const auto *b = up[0].get<BinaryOperator>();
        if (b && b->getOpcode() == BO_Assign && varOf(b->getLHS()) == c) inIncrement = true;
        const Stmt *next = up[0].get<Stmt>();
        if (!next) break;
        up = m_.ctx.getParents(*next);
      }
      if (!inIncrement && !contains(modulo.dividend, ref, m_.sm)) counterReadElsewhere_ = true;
      continue;
    } else {
      return fail(changes, counterFix);
    }
    if (reset) {
      if (*reset != *start || contains(loop_, write, m_.sm)) return fail(changes, counterFix);
      counterStatements_.push_back(write);
      continue;
    }
    if (!increment) return fail(changes, counterFix);
    increments.push_back(write);
    if (write == dividend.increment) {
      incrementsBefore = dividend.increment->isPrefix() ? 1 : 0;
      continue;
    }
    if (!contains(body_, write, m_.sm) || !isExpressionStatement(*write, m_.ctx) ||
        parentBlock(*write, m_.ctx) != body_)
      return fail(changes, counterFix);
    counterStatements_.push_back(write);
    incrementsBefore = indexOf(write) < indexOf(step_) ? 1 : 0;
  }
  if (increments.size() != 1 || incrementsBefore < 0) return fail(changes, counterFix);

  // On the b-th batch (from 1) the dividend is start - 1 + b + incrementsBefore + constant: the
  // condition must hold exactly when b is a multiple of k.
  int64_t phase = *start - 1 + incrementsBefore + dividend.constant;
  Linear r;
  if (modulo.remainder) {
    const VarDecl *none = nullptr;
    std::optional<Linear> rem = linear(modulo.remainder, steps_, none, m_.ctx);
    if (!rem || none)
      r.constant = -1, r.k = 2;  // never every k-th batch: reported below
    else
      r = *rem;
  }
  bool everyKth;
  if (steps_.value) {
    int64_t k = *steps_.value;
    int64_t rv = r.k * k + r.constant, shift = dividend.k * k + phase;
    everyKth = rv >= 0 && rv < k && (((rv - shift) % k) + k) % k == 0;
  } else {
    everyKth = r.constant == phase && ((r.k == 0 && r.constant == 0) || (r.k == 1 && r.constant == -1));
  }
  if (!everyKth)
    return fail("`" + condition_ + "` does not hold exactly after batches " + stepsText_ + ", 2*" + stepsText_ +
                    ", ... (counting from 1), where accelerator.accumulate steps",
                counterFix);

  // The counter goes when only the condition reads it and every statement that changes it is whole.
  if (!counterReadElsewhere_)
    for (const DynTypedNode &parent : m_.ctx.getParents(*c))
      if (const auto *decl = parent.get<DeclStmt>(); decl && decl->isSingleDecl() && parentBlock(*decl, m_.ctx))
        counterDecl_ = decl;
  for (const Stmt *stmt : counterStatements_)
    if (!isExpressionStatement(*stmt, m_.ctx)) counterDecl_ = nullptr;
  return true;
}

// Every zero_grad and optimizer step of the loop is in the `if`, after backward; the optimizers step
// nowhere else in the function.
bool LoopAnalysis::checkZeroGradAndSteps() {
  if (indexOf(step_) < indexOf(backwardStmt_)) return fail("the `if` that steps comes before backward", howTo());
  std::vector<const CXXMemberCallExpr *> calls;
  collect(body_, calls);
  for (const CXXMemberCallExpr *call : calls) {
    bool inside = contains(step_->getThen(), call, m_.sm);
    if (isZeroGrad(call) && !inside)
      return fail("`" + m_.text(call->getSourceRange()) + "` runs outside the `if` that steps",
                  "call zero_grad right after step() inside the `if`; then acc-migrate rewrites the loop; " + howTo());
    if (isOptimizerStep(call) && !inside) return fail("an optimizer also steps outside the `if`", howTo());
  }
  std::vector<const CXXMemberCallExpr *> all;
  collect(fn_->getBody(), all);
  for (const CXXMemberCallExpr *call : all)
    if (isOptimizerStep(call) && !contains(loop_, call, m_.sm) &&
        std::find(optimizers_.begin(), optimizers_.end(), objectDecl(call)) != optimizers_.end())
      return fail(
          "the optimizer also steps after the loop (a last, shorter group?), which accelerator.accumulate "
          "does by itself at the end of each pass over the loader",
          "remove that step; then acc-migrate rewrites the loop; " + howTo());
  return true;
}

// No batch leaves the body before its step: accumulate() counts every batch from the body's start, the
// counter only those that reach its increment. A jump inside the `if`, after the step, is at a sync point.
bool LoopAnalysis::checkJumps() {
  std::vector<const Stmt *> jumps;
  std::function<void(const Stmt *, bool)> find = [&](const Stmt *s, bool nestedLoop) {
    if (!s || isa<LambdaExpr>(s)) return;
    if (isa<ReturnStmt>(s) || isa<GotoStmt>(s) || isa<CXXThrowExpr>(s) ||
        (!nestedLoop && (isa<ContinueStmt>(s) || isa<BreakStmt>(s))))
      jumps.push_back(s);
    bool inner = nestedLoop || isa<ForStmt>(s) || isa<CXXForRangeStmt>(s) || isa<WhileStmt>(s) || isa<DoStmt>(s) ||
                 isa<SwitchStmt>(s);
    for (const Stmt *child : s->children()) find(child, inner);
  };
  find(body_, false);
  for (const Stmt *jump : jumps)
    if (!contains(step_->getThen(), jump, m_.sm))
      return fail(
          "the loop body can leave a batch before the `if` that steps (`continue`, `break`, `return`, "
          "`throw`): accelerator.accumulate counts every batch the loop starts",
          howTo());
  return true;
}

// The models whose parameters the stepped optimizers hold (as prepare finds them); else those the loop calls.
void LoopAnalysis::findModels() {
  std::vector<const CXXMemberCallExpr *> calls;
  collect(step_->getThen(), calls);
  for (const CXXMemberCallExpr *call : calls)
    if (isOptimizerStep(call))
      if (const ValueDecl *opt = objectDecl(call);
          opt && std::find(optimizers_.begin(), optimizers_.end(), opt) == optimizers_.end())
        optimizers_.push_back(opt);
  auto add = [&](const ValueDecl *model) {
    if (model && moduleClass(model->getType()) && std::find(models_.begin(), models_.end(), model) == models_.end())
      models_.push_back(model);
  };
  std::function<void(const Stmt *, int)> mentioned = [&](const Stmt *s, int depth) {
    if (!s || depth > 2) return;
    if (const auto *ref = dyn_cast<DeclRefExpr>(s)) {
      if (const auto *var = dyn_cast<VarDecl>(ref->getDecl())) {
        add(var);
        if (var->isLocalVarDecl() && var->hasInit() && !moduleClass(var->getType()))
          mentioned(var->getInit(), depth + 1);
      }
    }
    if (const auto *member = dyn_cast<MemberExpr>(s))
      if (isa<CXXThisExpr>(member->getBase()->IgnoreParenImpCasts())) add(member->getMemberDecl());
    for (const Stmt *child : s->children()) mentioned(child, depth);
  };
  for (const ValueDecl *opt : optimizers_)
    if (const auto *var = dyn_cast<VarDecl>(opt); var && var->hasInit()) mentioned(var->getInit(), 0);
  if (!models_.empty() || !body_) return;
  // The optimizer comes from elsewhere (a parameter): the models the loop calls.
  std::vector<const CXXMemberCallExpr *> loopCalls;
  collect(body_, loopCalls);
  for (const CXXMemberCallExpr *call : loopCalls) add(objectDecl(call));
  std::vector<const CXXOperatorCallExpr *> holderCalls;  // `model(x)`, `model->forward(x)`
  collect(body_, holderCalls);
  for (const CXXOperatorCallExpr *call : holderCalls)
    if (call->getNumArgs() >= 1)
      if (const auto *ref = dyn_cast<DeclRefExpr>(call->getArg(0)->IgnoreParenImpCasts())) add(ref->getDecl());
}

// `accumulate`, unless the function spells that identifier already (a variable, `using std::accumulate`).
std::string LoopAnalysis::guardName() const {
  std::set<std::string> identifiers;
  CharSourceRange range = CharSourceRange::getTokenRange(fn_->getBody()->getSourceRange());
  StringRef text = Lexer::getSourceText(range, m_.sm, m_.lang);
  Lexer lexer(range.getBegin(), m_.lang, text.begin(), text.begin(), text.end());
  Token token;
  while (!lexer.LexFromRawLexer(token))
    if (token.is(tok::raw_identifier)) identifiers.insert(token.getRawIdentifier().str());
  if (token.is(tok::raw_identifier)) identifiers.insert(token.getRawIdentifier().str());
  for (std::string name : {"accumulate", "accumulation", "accumulate_guard"})
    if (!identifiers.count(name)) return name;
  for (int i = 2;; ++i)
    if (!identifiers.count("accumulate_guard" + std::to_string(i))) return "accumulate_guard" + std::to_string(i);
}

// The `if` goes when it holds only step()/zero_grad() of optimizers held by value: acc::Optimizer's own
// step()/zero_grad() then skip while accumulating (zero_grad is not virtual: through a base pointer or
// reference it would clear what accumulates).
bool LoopAnalysis::unwrapsStep() const {
  const auto *then = dyn_cast<CompoundStmt>(step_->getThen());
  std::vector<const Stmt *> stmts;
  if (then)
    stmts.assign(then->body_begin(), then->body_end());
  else
    stmts.push_back(step_->getThen());
  for (const Stmt *stmt : stmts) {
    const auto *e = dyn_cast<Expr>(stmt);
    const auto *call = e ? dyn_cast<CXXMemberCallExpr>(e->IgnoreImplicit()) : nullptr;  // step() returns a tensor
    if (!call || !(isOptimizerStep(call) || isCallTo(call, "zero_grad", "torch::optim::Optimizer"))) return false;
    const ValueDecl *opt = objectDecl(call);
    const auto *declarator = dyn_cast_or_null<DeclaratorDecl>(opt);
    Holding holding;
    if (!declarator || isa<ParmVarDecl>(declarator) || !optimizerClass(opt->getType(), &holding) ||
        holding != Holding::Value || opt->getType()->isReferenceType() || !declarator->getTypeSourceInfo() ||
        declarator->getType()->getContainedAutoType() || !m_.inProject(declarator->getLocation()))
      return false;
  }
  return !stmts.empty();
}

// The runtime needs acc::Optimizer once gradient_accumulation_steps > 1 (accelerator.prepare rejects a
// plain one, naming this fix). Where the stepped optimizer is created in sight, it is created so:
// `torch::optim::SGD optimizer(...)` and `std::make_shared<torch::optim::Adam>(...)` get `acc::Optimizer<T>`,
// the very edits optimizer-declaration makes (identical edits are merged), so the rule is right alone.
void LoopAnalysis::wrapOptimizer(const ValueDecl *optimizer) {
  auto wrap = [&](const TypeSourceInfo *written) {
    QualType type = written ? written->getType() : QualType();
    const CXXRecordDecl *rd =
        type.isNull() || type->isReferenceType() || type->isPointerType() || type->getContainedAutoType()
            ? nullptr
            : type->getAsCXXRecordDecl();
    if (!rd || !derivesFrom(rd, "torch::optim::Optimizer") || derivesFrom(rd, "acc::Optimizer")) return;
    SourceRange range = written->getTypeLoc().getSourceRange();
    std::string spelled = m_.text(range);
    if (!spelled.empty()) m_.replace(range, "acc::Optimizer<" + spelled + ">");
  };
  const auto *declarator = dyn_cast<DeclaratorDecl>(optimizer);
  if (!declarator || isa<ParmVarDecl>(declarator) || !m_.inProject(declarator->getLocation())) return;
  wrap(declarator->getTypeSourceInfo());
  const auto *var = dyn_cast<VarDecl>(declarator);
  const auto *call =
      var && var->getInit() ? dyn_cast<CallExpr>(var->getInit()->IgnoreUnlessSpelledInSource()) : nullptr;
  const auto *callee = call ? dyn_cast<DeclRefExpr>(call->getCallee()->IgnoreImplicit()) : nullptr;
  if (callee && callee->getNumTemplateArgs() >= 1 &&
      (isFunctionNamed(call->getDirectCallee(), "std::make_shared") ||
       isFunctionNamed(call->getDirectCallee(), "std::make_unique")))
    wrap(callee->getTemplateArgs()[0].getTypeSourceInfo());
}

void LoopAnalysis::rewrite() {
  const SourceManager &sm = m_.sm;
  std::string indent = lineIndent(body_->body_front()->getBeginLoc(), sm);
  std::string models;
  for (const ValueDecl *model : models_) models += (models.empty() ? "" : ", ") + model->getNameAsString();
  m_.insert(afterToken(body_->getLBracLoc(), sm, m_.lang),
            "\n" + indent + "auto " + guardName() + " = accelerator.accumulate(" + models + ");");

  // The division goes: accelerator.backward divides by gradient_accumulation_steps.
  std::string lossName = loss_->getNameAsString();
  std::string redivide;
  if (divisionIsStatement_) {
    redivide = statementText(divisionStmt_);
    m_.remove(removalRange(statementRange(divisionStmt_, sm, m_.lang), sm));
  } else {
    redivide = lossName + " = " + lossName + " / " + m_.text(divisor_->getSourceRange()) + ";";
    m_.replace(division_->getSourceRange(), m_.text(numerator_->getSourceRange()));
  }
  // What backward's rule writes (Backward.cpp), so that the two edits merge.
  const auto *member = cast<MemberExpr>(backward_->getCallee()->IgnoreParens());
  std::string args;
  if (std::optional<Token> lparen = Lexer::findNextToken(member->getMemberLoc(), sm, m_.lang);
      lparen && lparen->is(tok::l_paren))
    args = StringRef(Lexer::getSourceText(CharSourceRange::getCharRange(lparen->getEndLoc(), backward_->getRParenLoc()),
                                          sm, m_.lang))
               .trim()
               .str();
  m_.replace(backward_->getSourceRange(),
             "accelerator.backward(" +
                 m_.text(backward_->getImplicitObjectArgument()->IgnoreImpCasts()->getSourceRange()) +
                 (args.empty() ? "" : ", " + args) + ")");
  // Read afterwards (printed, summed): the loss as it was, divided by k.
  if (readAfterBackward_)
    m_.insert(statementRange(backwardStmt_, sm, m_.lang).getEnd(),
              "\n" + lineIndent(backwardStmt_->getBeginLoc(), sm) + redivide);

  // The counter.
  std::string stepIndent = lineIndent(step_->getBeginLoc(), sm);
  if (counterDecl_) {
    m_.remove(removalRange(statementRange(counterDecl_, sm, m_.lang), sm));
    for (const Stmt *stmt : counterStatements_) m_.remove(removalRange(statementRange(stmt, sm, m_.lang), sm));
  } else if (conditionIncrement_) {
    m_.insert(step_->getBeginLoc(), "++" + counter_->getNameAsString() + ";\n" + stepIndent);
  }

  for (const ValueDecl *opt : optimizers_) wrapOptimizer(opt);
  if (!unwrapsStep()) {
    m_.replace(step_->getCond()->getSourceRange(), "accelerator.sync_gradients()");
  } else {
    // `if (...) {` and `}` go, the lines between lose one level of indentation.
    if (const auto *then = dyn_cast<CompoundStmt>(step_->getThen())) {
      m_.remove(removalRange(
          CharSourceRange::getCharRange(step_->getBeginLoc(), afterToken(then->getLBracLoc(), sm, m_.lang)), sm));
      m_.remove(removalRange(
          CharSourceRange::getCharRange(then->getRBracLoc(), afterToken(then->getRBracLoc(), sm, m_.lang)), sm));
      FileID file = sm.getFileID(then->getLBracLoc());
      StringRef buffer = sm.getBufferData(file);
      unsigned from = sm.getFileOffset(then->getLBracLoc()), to = sm.getFileOffset(then->getRBracLoc());
      std::string inner = then->body_empty() ? "" : lineIndent(then->body_front()->getBeginLoc(), sm);
      if (inner.size() > stepIndent.size() && StringRef(inner).startswith(stepIndent))
        for (size_t at = buffer.find('\n', from); at != StringRef::npos && at < to; at = buffer.find('\n', at + 1))
          if (buffer.substr(at + 1).startswith(inner)) {
            SourceLocation line = sm.getLocForStartOfFile(file).getLocWithOffset(at + 1 + stepIndent.size());
            m_.remove(CharSourceRange::getCharRange(line, line.getLocWithOffset(inner.size() - stepIndent.size())));
          }
    } else {
      m_.remove(CharSourceRange::getCharRange(step_->getBeginLoc(), step_->getThen()->getBeginLoc()));
    }
  }
  m_.useAccelerator(m_.enclosingFunction(*step_));
  m_.report(
      step_->getBeginLoc(),
      "accelerator.accumulate steps after every " + stepsText_ +
          "-th batch and at the end of each pass over the prepared loader (Accelerate's rule): the steps of "
          "the original when the loader's batches per epoch are a multiple of " +
          stepsText_,
      "otherwise the last, shorter group of each epoch is stepped too (its loss still divided by " + stepsText_ + ")",
      Finding::Level::Note);
}

// The function whose body holds `s`: an instantiation's own (its types are concrete), not its template.
const FunctionDecl *ownFunction(const Stmt &s, ASTContext &ctx) {
  for (DynTypedNodeList parents = ctx.getParents(s); !parents.empty();) {
    if (const auto *fn = parents[0].get<FunctionDecl>()) return fn;
    const Stmt *p = parents[0].get<Stmt>();
    if (!p) return nullptr;
    parents = ctx.getParents(*p);
  }
  return nullptr;
}

// The nearest loop around `s` in its function.
const Stmt *enclosingLoop(const Stmt &s, ASTContext &ctx) {
  for (DynTypedNodeList parents = ctx.getParents(s); !parents.empty();) {
    const Stmt *p = parents[0].get<Stmt>();
    if (!p) return nullptr;
    if (isa<ForStmt>(p) || isa<CXXForRangeStmt>(p) || isa<WhileStmt>(p) || isa<DoStmt>(p)) return p;
    if (isa<LambdaExpr>(p)) return nullptr;
    parents = ctx.getParents(*p);
  }
  return nullptr;
}

// The loop accumulates with acc already (`accelerator.accumulate(...)`, `accelerator.sync_gradients()`).
bool accumulatesWithAcc(const Stmt *s) {
  std::vector<const CXXMemberCallExpr *> calls;
  collect(s, calls);
  return std::any_of(calls.begin(), calls.end(), [](const CXXMemberCallExpr *call) {
    const CXXMethodDecl *method = call->getMethodDecl();
    return method && (method->getName() == "accumulate" || method->getName() == "sync_gradients") &&
           call->getImplicitObjectArgument() && isAccelerator(call->getImplicitObjectArgument()->getType());
  });
}

}  // namespace

void registerGradientAccumulation(Migration &m) {
  struct State {
    std::vector<const IfStmt *> steps;
    bool hasAccelerator = false;
    std::vector<std::unique_ptr<LoopAnalysis>> analyses;
  };
  auto state = std::make_shared<State>();
  auto step = cxxMemberCallExpr(
      callee(cxxMethodDecl(hasName("step"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::torch::optim::Optimizer"))))));
  m.onMatch(
      ifStmt(hasThen(stmt(anyOf(step, hasDescendant(step)))), inFunction(functionDecl(isDefinition()))).bind("if"),
      [state](const BoundNodes &nodes) { state->steps.push_back(nodes.getNodeAs<IfStmt>("if")); });
  m.onMatch(valueDecl(hasType(qualType(isAcceleratorType()))).bind("acc"),
            [state](const BoundNodes &) { state->hasAccelerator = true; });
  m.atEnd([&m, state] {
    std::set<SourceLocation> seen;  // a template's instantiations share its text
    std::vector<Plan> plans;
    for (const IfStmt *ifStmt : state->steps) {
      const Stmt *loop = enclosingLoop(*ifStmt, m.ctx);
      const FunctionDecl *fn = ownFunction(*ifStmt, m.ctx);
      // A template's pattern is seen through its instantiations; a loop that accumulates with acc is migrated.
      if (!loop || !fn || !fn->getBody() || fn->isTemplated() || accumulatesWithAcc(loop)) continue;
      if (!seen.insert(ifStmt->getBeginLoc()).second) continue;
      // The outermost `if` around the step in its loop speaks for it.
      bool outer = true;
      for (DynTypedNodeList parents = m.ctx.getParents(*ifStmt); !parents.empty();) {
        const Stmt *p = parents[0].get<Stmt>();
        if (!p || p == loop) break;
        if (const auto *around = dyn_cast<IfStmt>(p); around && contains(around->getThen(), ifStmt, m.sm))
          outer = false;
        parents = m.ctx.getParents(*p);
      }
      if (!outer) continue;
      state->analyses.push_back(std::make_unique<LoopAnalysis>(m, ifStmt, loop, fn, state->hasAccelerator));
      if (std::optional<Plan> plan = state->analyses.back()->run()) plans.push_back(std::move(*plan));
    }
    // One accelerator, one gradient_accumulation_steps.
    for (const Plan &plan : plans) {
      if (plan.option != plans.front().option) {
        m.report(plan.step->getBeginLoc(),
                 "manual gradient accumulation left as is: another loop of this file accumulates with " +
                     plans.front().option + ", and the accelerator has one gradient_accumulation_steps",
                 "it is correct on N processes, but every batch all-reduces the gradients");
        continue;
      }
      if (&plan == &plans.front()) m.addAcceleratorOption(plan.option);
      plan.apply();
    }
  });
}

}  // namespace accmigrate
