// What makes a value rank-local: the innermost sub-expression responsible (the culprit) and why,
// from what the standard library, C, torch, acc and the project's own functions give.
#include "analysis/RankDependenceImpl.h"
#include "analysis/TorchTypes.h"

#include <llvm/ADT/StringSet.h>

namespace accmigrate {
namespace rankdep {

// The outermost named namespace around `d` ("std", "torch", ...), "" at global scope.
StringRef outermostNamespace(const Decl *d) {
  StringRef name;
  for (const DeclContext *dc = d->getDeclContext(); dc; dc = dc->getParent())
    if (const auto *ns = dyn_cast<NamespaceDecl>(dc); ns && !ns->isAnonymousNamespace()) name = ns->getName();
  return name;
}

bool inNamespaceNamed(const Decl *d, StringRef name) {
  for (const DeclContext *dc = d->getDeclContext(); dc; dc = dc->getParent())
    if (const auto *ns = dyn_cast<NamespaceDecl>(dc); ns && ns->getName() == name) return true;
  return false;
}

bool isStandardLibrary(const Decl *d) {
  StringRef ns = outermostNamespace(d);
  return ns == "std" || ns == "__gnu_cxx";
}

bool isTorchOrAcc(const Decl *d) {
  StringRef ns = outermostNamespace(d);
  return ns == "at" || ns == "c10" || ns == "torch" || ns == "caffe2" || ns == "acc";
}

// A C function of the system's headers (`atoi`, `getenv`; std::atoi is the same declaration).
bool isCFunction(const FunctionDecl *fn, const SourceManager &sm) {
  const DeclContext *dc = fn->getDeclContext();
  while (isa<LinkageSpecDecl>(dc)) dc = dc->getParent();
  return dc->isTranslationUnit() && sm.isInSystemHeader(fn->getLocation());
}

std::string nameOf(const NamedDecl *d) { return d->getDeclName().getAsString(); }

// The lambda's call operator, if `fn` is one.
bool isLambdaOperator(const FunctionDecl *fn) {
  const auto *method = dyn_cast_or_null<CXXMethodDecl>(fn);
  return method && method->getParent()->isLambda();
}

// The function whose body holds `fn`'s body, seen through lambdas (they share the enclosing
// function's variables); `fn` itself when it is no lambda or a lambda outside any function.
const FunctionDecl *outerOf(const FunctionDecl *fn) {
  const FunctionDecl *outer = fn;
  while (isLambdaOperator(outer)) {
    const DeclContext *dc = cast<CXXMethodDecl>(outer)->getParent()->getDeclContext();
    while (dc && !isa<FunctionDecl>(dc)) dc = dc->getParent();
    if (!dc) break;
    outer = cast<FunctionDecl>(dc);
  }
  return outer;
}

// The function (seen through lambdas) whose body declares `var`, or null for a global or a member.
const FunctionDecl *outerFunction(const VarDecl *var) {
  for (const DeclContext *dc = var->getDeclContext(); dc; dc = dc->getParent())
    if (const auto *fn = dyn_cast<FunctionDecl>(dc)) return outerOf(fn);
  return nullptr;
}

// Call sites and parameters are indexed by the function as written: a template's instantiations
// share their pattern's entry.
const FunctionDecl *functionKey(const FunctionDecl *fn) {
  if (const FunctionDecl *pattern = fn->getTemplateInstantiationPattern()) fn = pattern;
  return fn->getCanonicalDecl();
}

const CXXRecordDecl *classOf(QualType type) {
  if (type.isNull()) return nullptr;
  type = type.getNonReferenceType();
  if (type->isPointerType()) type = type->getPointeeType();
  return type->getAsCXXRecordDecl();
}

bool isStream(QualType type) { return derivesFrom(classOf(type), "std::basic_ios"); }
bool isInputStream(QualType type) { return derivesFrom(classOf(type), "std::basic_istream"); }
// A stream over a string, not a file: what it reads does not depend on when.
bool isStringStream(QualType type) {
  const CXXRecordDecl *rd = classOf(type);
  return derivesFrom(rd, "std::basic_istringstream") || derivesFrom(rd, "std::basic_stringstream") ||
         derivesFrom(rd, "std::basic_ostringstream");
}
bool isFileOutput(QualType type) {
  const CXXRecordDecl *rd = classOf(type);
  return derivesFrom(rd, "std::basic_ofstream") || derivesFrom(rd, "std::basic_fstream");
}
// An acc::Accelerator, also through a pointer (`accelerator->reduce(...)`).
bool isAcceleratorObject(const Expr *object) {
  if (!object) return false;
  QualType type = object->getType();
  return isAccelerator(type->isPointerType() ? type->getPointeeType() : type);
}

Library classifyStandard(const NamedDecl *d) {
  const auto *record = dyn_cast<CXXRecordDecl>(d);
  if (!record) record = dyn_cast<CXXRecordDecl>(d->getDeclContext());
  for (const NamedDecl *n : {d, static_cast<const NamedDecl *>(record)}) {
    if (!n) continue;
    std::string name = nameOf(n);
    for (const char *random : {"random_device", "engine", "distribution", "mersenne", "linear_congruential",
                               "subtract_with_carry", "discard_block", "shuffle", "rand"})
      if (name.find(random) != std::string::npos) return Library::Random;
    if (name.find("clock") != std::string::npos || name == "now") return Library::Time;
    if (name == "thread" || name == "get_id" || name == "hardware_concurrency") return Library::Thread;
  }
  if (inNamespaceNamed(d, "this_thread")) return Library::Thread;
  if (inNamespaceNamed(d, "filesystem") && !(record && record->getName() == "path") &&
      !(d->getDeclName().getNameKind() == DeclarationName::CXXOperatorName))
    return Library::FileSystem;
  return Library::Pure;
}

// C functions whose result depends only on their arguments.
bool isPureCFunction(StringRef name) {
  static const llvm::StringSet<> kPure = {
      "atoi",   "atol",     "atoll",   "atof",    "strtol",     "strtoll",     "strtoul", "strtoull", "strtof",
      "strtod", "strtold",  "strcmp",  "strncmp", "strcasecmp", "strncasecmp", "strlen",  "abs",      "labs",
      "llabs",  "fabs",     "fabsf",   "sqrt",    "sqrtf",      "cbrt",        "pow",     "powf",     "exp",
      "expf",   "log",      "logf",    "log2",    "log10",      "ceil",        "ceilf",   "floor",    "floorf",
      "round",  "roundf",   "lround",  "llround", "trunc",      "fmod",        "fmin",    "fmax",     "isnan",
      "isinf",  "isfinite", "tolower", "toupper"};
  return kPure.count(name);
}
bool isRandomCFunction(StringRef name) {
  static const llvm::StringSet<> kRandom = {"rand",    "random",  "rand_r",  "drand48", "erand48",
                                            "lrand48", "nrand48", "mrand48", "jrand48", "arc4random"};
  return kRandom.count(name);
}
bool isTimeCFunction(StringRef name) {
  static const llvm::StringSet<> kTime = {"time", "clock", "gettimeofday", "clock_gettime", "ftime"};
  return kTime.count(name);
}

// torch's factories: the same values on every process when their arguments are.
bool isTorchFactory(StringRef name) {
  static const llvm::StringSet<> kFactories = {"tensor", "scalar_tensor", "zeros",     "ones",
                                               "full",   "arange",        "linspace",  "logspace",
                                               "eye",    "zeros_like",    "ones_like", "full_like"};
  return kFactories.count(name);
}

// Tensor methods that hand out the tensor's memory: writes through them cannot be followed.
bool exposesStorage(StringRef name) {
  return name == "data" || name == "set_data" || name.contains("data_ptr") || name.contains("accessor") ||
         name.contains("storage") || name.contains("unsafeGet");
}

bool isCollectiveName(StringRef name) {
  return name == "reduce" || name == "gather" || name == "gather_for_metrics" || name == "broadcast";
}

bool isBefore(const SourceManager &sm, SourceLocation a, SourceLocation b) {
  return sm.isBeforeInTranslationUnit(sm.getExpansionLoc(a), sm.getExpansionLoc(b));
}

}  // namespace rankdep

using namespace rankdep;

bool RankDependence::Impl::blame(Culprit &c, const Expr *e, Why why, std::string detail) {
  c = Culprit{e, why, std::move(detail), nullptr, {}};
  return true;
}

bool RankDependence::Impl::any(ArrayRef<const Expr *> es, const Mode &m, Culprit &c) {
  for (const Expr *e : es)
    if (e && culprit(e, m, c)) return true;
  return false;
}

bool RankDependence::Impl::children(const Stmt *e, const Mode &m, Culprit &c) {
  for (const Stmt *child : e->children())
    if (const auto *operand = dyn_cast_or_null<Expr>(child); operand && culprit(operand, m, c)) return true;
  return false;
}

bool RankDependence::Impl::culprit(const Expr *e, const Mode &m, Culprit &c) {
  if (!e) return false;
  e = e->IgnoreParens();
  if (e->isTypeDependent() || e->isValueDependent())
    return blame(c, e, Why::Doubt);  // a template's pattern: known only per instantiation
  if (isa<IntegerLiteral, FloatingLiteral, CXXBoolLiteralExpr, CharacterLiteral, StringLiteral, CXXNullPtrLiteralExpr,
          GNUNullExpr, UnaryExprOrTypeTraitExpr, SubstNonTypeTemplateParmExpr, ImplicitValueInitExpr,
          CXXScalarValueInitExpr, TypeTraitExpr, SizeOfPackExpr, CXXNoexceptExpr>(e))
    return false;
  // A compile-time constant (constexpr, `const int` from literals, numeric_limits<...>::max()).
  QualType type = e->getType();
  if ((type->isArithmeticType() || type->isEnumeralType()) && !isa<DeclRefExpr>(e) && e->isEvaluatable(ctx_))
    return false;
  if (const auto *ref = dyn_cast<DeclRefExpr>(e)) return declRef(ref, m, c);
  if (const auto *me = dyn_cast<MemberExpr>(e)) return member(me, m, c);
  if (const auto *call = dyn_cast<CallExpr>(e)) return this->call(call, m, c);
  if (const auto *construction = dyn_cast<CXXConstructExpr>(e)) return construct(construction, m, c);
  if (const auto *arg = dyn_cast<CXXDefaultArgExpr>(e)) return culprit(arg->getExpr(), m, c);
  if (const auto *init = dyn_cast<CXXDefaultInitExpr>(e)) return culprit(init->getExpr(), m, c);
  if (isa<CXXThisExpr>(e)) return thisMember(e, m, c);
  if (const auto *op = dyn_cast<UnaryOperator>(e); op && op->getOpcode() == UO_AddrOf) return blame(c, e, Why::Address);
  // Operators and conversions are uniform when their operands are.
  if (isa<UnaryOperator, BinaryOperator, AbstractConditionalOperator, CastExpr, ExprWithCleanups,
          MaterializeTemporaryExpr, CXXBindTemporaryExpr, ArraySubscriptExpr, InitListExpr, CXXStdInitializerListExpr,
          ConstantExpr, FullExpr, ParenListExpr>(e))
    return children(e, m, c);
  return blame(c, e, Why::Doubt);
}

bool RankDependence::Impl::declRef(const DeclRefExpr *ref, const Mode &m, Culprit &c) {
  const ValueDecl *decl = ref->getDecl();
  if (isa<EnumConstantDecl, NonTypeTemplateParmDecl, FunctionDecl>(decl)) return false;
  const auto *var = dyn_cast<VarDecl>(decl);
  if (!var) return blame(c, ref, Why::Doubt);                  // a structured binding...
  if (var->isUsableInConstantExpressions(ctx_)) return false;  // constexpr, `const int` from constants
  if (assumedUniform(var, ref, m)) return false;
  if (!variableCause(var, m)) return false;
  return blame(c, ref, Why::Variable, var->getNameAsString());
}

// A member `x.f`: one value with the object (a struct counts as a whole). Through `this`, see
// thisMember.
bool RankDependence::Impl::member(const MemberExpr *me, const Mode &m, Culprit &c) {
  const ValueDecl *decl = me->getMemberDecl();
  if (isa<EnumConstantDecl>(decl)) return false;
  if (const auto *var = dyn_cast<VarDecl>(decl)) {  // a static member: a global
    if (!variableCause(var, m)) return false;
    return blame(c, me, Why::Variable, var->getNameAsString());
  }
  const Expr *base = me->getBase()->IgnoreParenImpCasts();
  if (isa<CXXThisExpr>(base)) {
    const auto *field = dyn_cast<FieldDecl>(decl);
    if (field && field->isMutable()) return blame(c, me, Why::ThisMember);
    return thisMember(me, m, c);
  }
  return culprit(me->getBase(), m, c);
}

// `this` and its members are uniform only while following a const method (it changes no member)
// called on a uniform object; elsewhere the object's state is not followed.
bool RankDependence::Impl::thisMember(const Expr *e, const Mode &m, Culprit &c) {
  const auto *method = dyn_cast_or_null<CXXMethodDecl>(m.fn);
  if (method && method->isConst() && !m.localThis) return false;
  return blame(c, e, Why::ThisMember);
}

bool RankDependence::Impl::call(const CallExpr *call, const Mode &m, Culprit &c) {
  const FunctionDecl *callee = call->getDirectCallee();
  if (!callee) return blame(c, call, Why::UnknownCall, "`" + text(call->getCallee()) + "`");
  std::string name = nameOf(callee);
  const Expr *object = nullptr;
  if (const auto *mc = dyn_cast<CXXMemberCallExpr>(call)) object = mc->getImplicitObjectArgument();
  const auto *op = dyn_cast<CXXOperatorCallExpr>(call);
  if (op && isa<CXXMethodDecl>(callee) && call->getNumArgs() > 0) object = call->getArg(0);
  std::vector<const Expr *> args;
  for (unsigned i = (op && isa<CXXMethodDecl>(callee)) ? 1 : 0; i < call->getNumArgs(); ++i)
    args.push_back(call->getArg(i));

  // The accelerator: its collectives give every process the same value, its queries differ.
  if (isAcceleratorObject(object)) {
    if (name == "num_processes" || name == "check_trigger" || isCollectiveName(name)) return false;
    if (name == "process_index" || name == "local_process_index") return blame(c, call, Why::ProcessIndex);
    if (name == "is_main_process" || name == "is_local_main_process" || name == "is_last_process")
      return blame(c, call, Why::OneProcess);
    return blame(c, call, Why::Accelerator);
  }
  if (outermostNamespace(callee) == "acc" && isCollectiveName(name)) return false;
  // The size of a dataset: a prepared loader needs every process to build the same dataset.
  if (const auto *method = dyn_cast<CXXMethodDecl>(callee);
      method && name == "size" && derivesFrom(method->getParent(), "torch::data::datasets::BatchDataset"))
    return false;

  // The environment: the same on every process but for the launch variables.
  if ((name == "getenv" || name == "secure_getenv") && (isCFunction(callee, sm_) || isStandardLibrary(callee))) {
    const auto *literal =
        call->getNumArgs() == 1 ? dyn_cast<StringLiteral>(call->getArg(0)->IgnoreParenImpCasts()) : nullptr;
    if (!literal) return blame(c, call, Why::DynamicGetenv);
    if (RankDependence::isPerProcessVariable(literal->getString()))
      return blame(c, call, Why::LaunchVariable, literal->getString().str());
    return false;
  }

  // Streams: `in >> x`, std::getline(in, x), in.good(), !in...
  if (object && isStream(object->getType())) return streamRead(call, object, m, c);
  if (isStandardLibrary(callee) && call->getNumArgs() > 0 && isStream(call->getArg(0)->getType()) &&
      (name == "getline" || name == "operator>>" || name == "operator<<" || name == "ws"))
    return streamRead(call, call->getArg(0), m, c);

  // Tensors: the same where computed from uniform tensors and values (a collective's result).
  bool tensorResult = isTensor(call->getType());
  if (object && isTensor(object->getType())) {
    // A method of a rank-local tensor: the variable, else the whole tensor expression, says why.
    if (culprit(object, m, c)) return c.why == Why::Variable || !tensorResult ? true : blame(c, call, Why::Tensor);
    return any(args, m, c);
  }
  if (isTorchOrAcc(callee)) {
    bool tensorOperands = false;
    for (const Expr *arg : call->arguments()) tensorOperands |= isTensor(arg->getType());
    if (isTorchFactory(name) || (op && tensorOperands)) {
      if (!(object && culprit(object, m, c)) && !any(args, m, c)) return false;
      if (tensorResult && c.why != Why::Variable) return blame(c, call, Why::Tensor);
      return true;
    }
    if (tensorResult) return blame(c, call, Why::Tensor);
    if (readsOptimizerSettings(callee)) return any(args, m, c);
    return blame(c, call, Why::UnknownCall, "`" + name + "`");
  }

  // The standard library and C: functions of their arguments, but for clocks, random numbers...
  if (isStandardLibrary(callee)) {
    switch (classifyStandard(callee)) {
      case Library::Random:
        return blame(c, call, Why::Random);
      case Library::Time:
        return blame(c, call, Why::Time);
      case Library::Thread:
        return blame(c, call, Why::Thread);
      case Library::FileSystem:
        return blame(c, call, Why::FileSystem);
      case Library::Pure:
        break;
    }
    if (object && culprit(object, m, c)) return true;
    return any(args, m, c);
  }
  if (isCFunction(callee, sm_)) {
    if (isRandomCFunction(name)) return blame(c, call, Why::Random);
    if (isTimeCFunction(name)) return blame(c, call, Why::Time);
    if (isPureCFunction(name)) return any(args, m, c);
    return blame(c, call, Why::UnknownCall, "`" + name + "`");
  }

  if (const auto *method = dyn_cast<CXXMethodDecl>(callee); method && method->getParent()->isLambda())
    return lambdaCall(call, method, m, c);
  if (const FunctionDecl *def = projectDefinition(callee)) {
    if (!projectCall(call, def, object, args, m, c)) return false;
    if (tensorResult && c.why == Why::ProjectCall) return blame(c, call, Why::Tensor);
    return true;
  }
  if (!sm_.isInSystemHeader(callee->getLocation())) return callElsewhere(call, callee, c);
  if (tensorResult) return blame(c, call, Why::Tensor);
  return blame(c, call, Why::UnknownCall, "`" + name + "`");
}

// An optimizer's or scheduler's settings (`optimizer.param_groups()[0].options().get_lr()`, a param
// group's options, get_last_lr): set from the program's values and stepped alike on every process.
// Not where a ReduceLROnPlateauScheduler steps: its steps follow a metric each process computes.
bool RankDependence::Impl::readsOptimizerSettings(const FunctionDecl *callee) {
  const auto *method = dyn_cast<CXXMethodDecl>(callee);
  if (!method) return false;
  const CXXRecordDecl *owner = method->getParent();
  bool optim = inNamespaceNamed(owner, "optim") ||
               (outermostNamespace(owner) == "acc" && (owner->getName() == "Optimizer" || owner->getName() == "Scheduler"));
  if (!optim) return false;
  indexCalls();
  for (const auto &[fn, sites] : calls_)
    if (const auto *step = dyn_cast<CXXMethodDecl>(fn);
        step && !sites.empty() && nameOf(step) == "step" &&
        derivesFrom(step->getParent(), "torch::optim::ReduceLROnPlateauScheduler"))
      return false;
  return true;
}

bool RankDependence::Impl::callElsewhere(const CallExpr *call, const FunctionDecl *callee, Culprit &c) {
  std::string key = RankDependence::crossFileKey(callee);
  if (!key.empty() && otherFiles_.uniformResults && otherFiles_.uniformResults->count(key)) return false;
  if (!key.empty() && otherFiles_.resultsNotSeen) otherFiles_.resultsNotSeen->insert(key);
  if (isTensor(call->getType())) return blame(c, call, Why::Tensor);
  return blame(c, call, Why::UnknownCall, "`" + nameOf(callee) + "`");
}

// Every parameter and the object rank-local: what the function returns is uniform only if it comes
// from no argument (a collective's result, a constant, the dataset's size).
bool RankDependence::Impl::returnsUniformWhateverArguments(const FunctionDecl *def) {
  if (!def || !def->hasBody() || def->getReturnType()->isVoidType() || readsFiles(def)) return false;
  unsigned params = def->getNumParams();
  const auto *method = dyn_cast<CXXMethodDecl>(def);
  Mode everyArgument{def, params >= 64 ? ~uint64_t(0) : (uint64_t(1) << params) - 1,
                     method && method->isInstance()};
  const Expr *returned = nullptr;
  return !summaryRankLocal(def, everyArgument, &returned);
}

// A call of the project's function `def`: uniform when what it returns is, given which of its
// arguments (and object) are rank-local, and, when it reads a file, called before training.
bool RankDependence::Impl::projectCall(const Expr *call, const FunctionDecl *def, const Expr *object,
                                       ArrayRef<const Expr *> args, const Mode &m, Culprit &c) {
  if (const auto *method = dyn_cast<CXXMethodDecl>(def); method && method->isVirtual())
    return blame(c, call, Why::UnknownCall, "the virtual `" + nameOf(def) + "`");
  Mode callee{def, 0, false};
  std::optional<Culprit> firstLocalArgument;
  for (unsigned i = 0; i < args.size(); ++i) {
    Culprit argument;
    if (culprit(args[i], m, argument)) {
      callee.localParams |= uint64_t(1) << std::min(i, 63u);
      if (!firstLocalArgument) firstLocalArgument = argument;
    }
  }
  if (object && !isa<CXXThisExpr>(object->IgnoreParenImpCasts())) {
    Culprit argument;
    if (culprit(object, m, argument)) {
      callee.localThis = true;
      if (!firstLocalArgument) firstLocalArgument = argument;
    }
  } else if (object && thisMember(object, m, c)) {
    callee.localThis = true;
    if (!firstLocalArgument) firstLocalArgument = c;
  }
  const Expr *returned = nullptr;
  if (summaryRankLocal(def, callee, &returned)) {
    // Rank-local only through its arguments: the argument says why.
    const Expr *ignored = nullptr;
    if (firstLocalArgument && !summaryRankLocal(def, Mode{def, 0, false}, &ignored)) {
      c = *firstLocalArgument;
      return true;
    }
    c = Culprit{call, Why::ProjectCall, "`" + nameOf(def) + "`", returned, callee};
    return true;
  }
  std::string event;
  if (readsFiles(def) && !beforeTraining(*call, m, &event)) return blame(c, call, Why::FileAfterTraining, event);
  return false;
}

// A lambda's call: what it returns, its parameters being what its calls pass (Facts/locals).
bool RankDependence::Impl::lambdaCall(const CallExpr *call, const CXXMethodDecl *op, const Mode &m, Culprit &c) {
  const FunctionDecl *outer = outerOf(op);
  Mode mode = m.fn == outer ? m : Mode{};
  if (!lambdasInProgress_.insert(op).second) return blame(c, call, Why::Recursion);
  bool local = false;
  auto found = facts(outer).returns.find(op);
  if (found != facts(outer).returns.end())
    for (const Expr *returned : found->second)
      if ((local = culprit(returned, mode, c))) break;
  lambdasInProgress_.erase(op);
  return local;
}

bool RankDependence::Impl::construct(const CXXConstructExpr *e, const Mode &m, Culprit &c) {
  const CXXConstructorDecl *ctor = e->getConstructor();
  const CXXRecordDecl *record = ctor->getParent();
  std::vector<const Expr *> args(e->arg_begin(), e->arg_end());
  if (isTensor(e->getType())) {
    if (!any(args, m, c)) return false;
    return c.why == Why::Variable ? true : blame(c, e, Why::Tensor);
  }
  if (isStandardLibrary(record)) {
    switch (classifyStandard(record)) {
      case Library::Random:
        return blame(c, e, Why::Random);
      case Library::Time:
        return blame(c, e, Why::Time);
      case Library::Thread:
        return blame(c, e, Why::Thread);
      case Library::FileSystem:
        return blame(c, e, Why::FileSystem);
      case Library::Pure:
        break;
    }
    return any(args, m, c);
  }
  if (isTorchOrAcc(record) || sm_.isInSystemHeader(record->getLocation()))
    return blame(c, e, Why::UnknownCall, "the constructor of `" + nameOf(record) + "`");
  // The project's class: a copy is its source; otherwise the members as the constructor
  // initialises them (in-class initialisers included), when its body is empty.
  if (ctor->isCopyOrMoveConstructor() && (ctor->isImplicit() || ctor->isDefaulted())) return any(args, m, c);
  const FunctionDecl *def = nullptr;
  const auto *body = ctor->hasBody(def) ? dyn_cast_or_null<CompoundStmt>(def->getBody()) : nullptr;
  if (def && (!body || !body->body_empty()))
    return blame(c, e, Why::UnknownCall, "the constructor of `" + nameOf(record) + "`");
  Mode mode{def ? def : ctor, 0, false};
  for (unsigned i = 0; i < args.size(); ++i) {
    Culprit argument;
    if (culprit(args[i], m, argument)) mode.localParams |= uint64_t(1) << std::min(i, 63u);
  }
  if (const auto *defined = dyn_cast_or_null<CXXConstructorDecl>(def)) {
    for (const CXXCtorInitializer *init : defined->inits())
      if (init->getInit() && culprit(init->getInit(), mode, c)) {
        if (mode.localParams && any(args, m, c)) return true;  // through an argument: it says why
        return blame(c, e, Why::UnknownCall, "the constructor of `" + nameOf(record) + "`");
      }
    return false;
  }
  for (const FieldDecl *field : record->fields())  // an implicit constructor not defined (yet)
    if (const Expr *init = field->getInClassInitializer(); init && culprit(init, Mode{}, c)) return true;
  return false;
}

// A read of `stream` by `read`: uniform when the stream is (made from uniform values, read alike)
// and, unless it reads a string, the read comes before training (another process may have written
// the file since).
bool RankDependence::Impl::streamRead(const Expr *read, const Expr *stream, const Mode &m, Culprit &c) {
  const Expr *root = stream->IgnoreParenImpCasts();
  while (const auto *chained = dyn_cast<CXXOperatorCallExpr>(root)) {  // `in >> a >> b`
    if (chained->getNumArgs() == 0 || !isStream(chained->getArg(0)->getType())) break;
    root = chained->getArg(0)->IgnoreParenImpCasts();
  }
  if (culprit(root, m, c)) return true;
  std::string event;
  if (!isStringStream(root->getType()) && !beforeTraining(*read, m, &event))
    return blame(c, read, Why::FileAfterTraining, event);
  return false;
}

// A call of the project's function `def` with rank-local arguments and object as `mode` says: what it
// returns (the first rank-local returned value in `returned`). Memoized; a call back into a summary
// being computed (recursion) answers rank-local.
bool RankDependence::Impl::summaryRankLocal(const FunctionDecl *def, const Mode &mode, const Expr **returned) {
  auto key = std::make_pair(def, mode);
  auto found = summaries_.find(key);
  if (found != summaries_.end()) {
    *returned = found->second.returned;
    return !found->second.done || found->second.rankLocal;  // recursion: in doubt
  }
  summaries_[key];
  Summary result;
  auto values = facts(def).returns.find(def);
  if (values != facts(def).returns.end())
    for (const Expr *value : values->second) {
      Culprit ignored;
      if (culprit(value, mode, ignored)) {
        result.rankLocal = true;
        result.returned = value;
        break;
      }
    }
  result.done = true;
  summaries_[key] = result;
  *returned = result.returned;
  return result.rankLocal;
}

}  // namespace accmigrate
