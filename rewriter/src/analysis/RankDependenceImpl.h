// RankDependence's insides, shared by its sources (rules use RankDependence.h):
//  - RankDependence.cpp: the API, which statements every rank reaches, explanations;
//  - RankDependenceValues.cpp: what makes a value rank-local (the culprit), the libraries' functions,
//    the project's functions followed (summaries);
//  - RankDependenceVariables.cpp: what a function does to its variables (writes, escapes), which of
//    them are rank-local (a fixpoint per function and mode), parameters, assumptions;
//  - RankDependenceCalls.cpp: the calls in the unit, training steps and file writes ("before
//    training").
#pragma once
#include "analysis/RankDependence.h"

#include <clang/AST/ASTTypeTraits.h>
#include <clang/AST/DeclCXX.h>
#include <clang/AST/ExprCXX.h>
#include <clang/Basic/SourceManager.h>
#include <llvm/ADT/ArrayRef.h>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace accmigrate {
namespace rankdep {

using namespace clang;
using llvm::ArrayRef;
using llvm::StringRef;

// Who declared what (the standard library, torch/acc, or the project), what the libraries give.

// The outermost named namespace around `d` ("std", "torch", ...), "" at global scope.
StringRef outermostNamespace(const Decl *d);

// `d` is inside a namespace named `name` (at any depth: "filesystem", "this_thread").
bool inNamespaceNamed(const Decl *d, StringRef name);
// Declared by the standard library (std, __gnu_cxx), by torch or acc (at, c10, torch, caffe2, acc).
bool isStandardLibrary(const Decl *d);
bool isTorchOrAcc(const Decl *d);

// A C function of the system's headers (`atoi`, `getenv`; std::atoi is the same declaration).
bool isCFunction(const FunctionDecl *fn, const SourceManager &sm);

// `d`'s name as written (`operator>>` for operators).
std::string nameOf(const NamedDecl *d);

// The lambda's call operator, if `fn` is one.
bool isLambdaOperator(const FunctionDecl *fn);

// The function whose body holds `fn`'s body, seen through lambdas (they share the enclosing
// function's variables); `fn` itself when it is no lambda or a lambda outside any function.
const FunctionDecl *outerOf(const FunctionDecl *fn);

// The function (seen through lambdas) whose body declares `var`, or null for a global or a member.
const FunctionDecl *outerFunction(const VarDecl *var);

// Call sites and parameters are indexed by the function as written: a template's instantiations
// share their pattern's entry.
const FunctionDecl *functionKey(const FunctionDecl *fn);

// The class of `type`, seen through references and pointers.
const CXXRecordDecl *classOf(QualType type);

// std::basic_ios and derived (any stream), std::basic_istream and derived (input).
bool isStream(QualType type);
bool isInputStream(QualType type);
// A stream over a string, not a file: what it reads does not depend on when.
bool isStringStream(QualType type);
// std::ofstream, std::fstream: made or opened, they may write a file.
bool isFileOutput(QualType type);
// An acc::Accelerator, also through a pointer (`accelerator->reduce(...)`).
bool isAcceleratorObject(const Expr *object);

// The standard library's sources of values that differ between processes.
enum class Library { Pure, Random, Time, Thread, FileSystem };

Library classifyStandard(const NamedDecl *d);

// C functions whose result depends only on their arguments.
bool isPureCFunction(StringRef name);
// C functions giving random numbers, the time.
bool isRandomCFunction(StringRef name);
bool isTimeCFunction(StringRef name);

// torch's factories: the same values on every process when their arguments are.
bool isTorchFactory(StringRef name);

// Tensor methods that hand out the tensor's memory: writes through them cannot be followed.
bool exposesStorage(StringRef name);

// The accelerator's collectives whose result is the same on every process (with check_trigger).
bool isCollectiveName(StringRef name);

// `a` comes before `b` in the translation unit (their expansion locations).
bool isBefore(const SourceManager &sm, SourceLocation a, SourceLocation b);

// What a function does to its variables.

// A write of a variable. Value: `expr` is the value written (an initialiser, an assigned value; for
// `in >> x`, `std::getline(in, x)`, `v.push_back(y)`, `t.add_(y)`, the call, whose value says what
// was written). Element: the variable is a range-for's, `expr` its range. OutArgument: the variable
// is passed by non-const reference to the project's function `expr` (a call), as argument `index`.
// Escape: `expr` is a reference through which the variable may be changed in ways not followed.
struct Write {
  enum Kind { Value, Element, OutArgument, Escape } kind;
  const Expr *expr;
  unsigned index = 0;
};

struct Facts {
  // Every variable and parameter of the function and of the lambdas in it, with its writes.
  std::map<const VarDecl *, std::vector<Write>> writes;
  // The returned values of the function and of each lambda in it.
  std::map<const FunctionDecl *, std::vector<const Expr *>> returns;
};

// Which parameters a summary assumes rank-local (bit i: parameter i, bit 63: 63 and above), and
// whether the object of a method is. `fn` null: the analysis in context (parameters from callers).
struct Mode {
  const FunctionDecl *fn = nullptr;
  uint64_t localParams = 0;
  bool localThis = false;
  bool operator<(const Mode &o) const {
    return std::tie(fn, localParams, localThis) < std::tie(o.fn, o.localParams, o.localThis);
  }
  bool operator==(const Mode &o) const {
    return fn == o.fn && localParams == o.localParams && localThis == o.localThis;
  }
};

enum class Why {
  Variable,
  Tensor,
  ProcessIndex,
  OneProcess,
  Accelerator,
  LaunchVariable,
  DynamicGetenv,
  Batch,
  Random,
  Time,
  Thread,
  FileSystem,
  Stdin,
  FileAfterTraining,
  Address,
  Global,
  ThisMember,
  ProjectCall,
  UnknownCall,
  Recursion,
  Doubt
};

// What makes a value rank-local: the innermost sub-expression responsible and why.
struct Culprit {
  const Expr *expr = nullptr;
  Why why = Why::Doubt;
  std::string detail;          // a name: the variable, the function, the launch variable, the event
  const Expr *next = nullptr;  // ProjectCall: the callee's rank-local returned value
  Mode nextMode;
};

// Why a variable is rank-local.
struct Cause {
  enum Kind { Write, Argument, ParameterType, LambdaParameter, Assumed, Recursion } kind;
  const rankdep::Write *write = nullptr;  // Write
  const Expr *argument = nullptr;         // Argument: the rank-local argument of a call
  Mode mode;                              // where `write`/`argument` is evaluated
};
}  // namespace rankdep

class RankDependence::Impl {
 public:
  using Write = rankdep::Write;
  using Facts = rankdep::Facts;
  using Mode = rankdep::Mode;
  using Why = rankdep::Why;
  using Culprit = rankdep::Culprit;
  using Cause = rankdep::Cause;

  Impl(clang::ASTContext &ctx, OtherFiles otherFiles)
      : ctx_(ctx), sm_(ctx.getSourceManager()), otherFiles_(otherFiles) {}

  // `e` is rank-local in mode `m` (in context, or inside a function being followed from a call);
  // then `c` says what makes it so.
  bool culprit(const clang::Expr *e, const Mode &m, Culprit &c);
  // The chain RankDependence::explain prints, from `e`'s culprit back to where the value came from.
  std::string explain(const clang::Expr *e, Mode m);
  Reach reach(const clang::Stmt &s);
  void assume(const clang::VarDecl *var, clang::SourceLocation point);
  std::string text(const clang::Stmt *s) const;
  bool returnsUniformWhateverArguments(const clang::FunctionDecl *def);
  unsigned line(clang::SourceLocation loc) const { return sm_.getPresumedLineNumber(sm_.getExpansionLoc(loc)); }

 private:
  // Values (RankDependenceValues.cpp).
  bool declRef(const clang::DeclRefExpr *ref, const Mode &m, Culprit &c);
  bool member(const clang::MemberExpr *me, const Mode &m, Culprit &c);
  bool thisMember(const clang::Expr *e, const Mode &m, Culprit &c);
  bool call(const clang::CallExpr *call, const Mode &m, Culprit &c);
  bool projectCall(const clang::Expr *call, const clang::FunctionDecl *def, const clang::Expr *object,
                   llvm::ArrayRef<const clang::Expr *> args, const Mode &m, Culprit &c);
  bool lambdaCall(const clang::CallExpr *call, const clang::CXXMethodDecl *op, const Mode &m, Culprit &c);
  bool construct(const clang::CXXConstructExpr *e, const Mode &m, Culprit &c);
  bool streamRead(const clang::Expr *read, const clang::Expr *stream, const Mode &m, Culprit &c);
  bool any(llvm::ArrayRef<const clang::Expr *> es, const Mode &m, Culprit &c);
  bool children(const clang::Stmt *e, const Mode &m, Culprit &c);
  static bool blame(Culprit &c, const clang::Expr *e, Why why, std::string detail = "");

  // Variables (RankDependenceVariables.cpp).
  std::optional<Cause> variableCause(const clang::VarDecl *var, const Mode &m);
  const std::map<const clang::VarDecl *, Cause> *locals(const clang::FunctionDecl *fn, const Mode &m);
  std::optional<Cause> parameterCause(const clang::ParmVarDecl *p, const Mode &m);
  bool writeRankLocal(const Write &w, const Mode &m, Culprit &c);
  bool assumedUniform(const clang::VarDecl *var, const clang::Expr *ref, const Mode &m);
  const Facts &facts(const clang::FunctionDecl *fn);
  std::optional<Write> use(const clang::DeclRefExpr *ref, const clang::VarDecl *var);
  std::optional<Write> argumentUse(const clang::CallExpr *call, unsigned argIndex, const clang::Expr *arg, bool tensor);

  // Functions (RankDependenceCalls.cpp).
  const clang::FunctionDecl *projectDefinition(const clang::FunctionDecl *fn) const;
  const std::vector<const clang::Expr *> &callSites(const clang::FunctionDecl *fn);
  bool callersUnknown(const clang::FunctionDecl *fn);
  void indexCalls();
  static const clang::Expr *argumentFor(const clang::Expr *site, const clang::ParmVarDecl *p);
  bool summaryRankLocal(const clang::FunctionDecl *def, const Mode &mode, const clang::Expr **returned);

  // Training and files (RankDependenceCalls.cpp).
  const std::vector<const clang::Stmt *> &events(const clang::FunctionDecl *fn);
  bool isEvent(const clang::Stmt *s);
  bool readsFiles(const clang::FunctionDecl *fn);
  bool beforeTraining(const clang::Stmt &s, const Mode &m, std::string *event,
                      std::set<const clang::FunctionDecl *> &seen);
  bool beforeTraining(const clang::Stmt &s, const Mode &m, std::string *event) {
    std::set<const clang::FunctionDecl *> seen;
    return beforeTraining(s, m, event, seen);
  }

  // Statements (RankDependence.cpp).
  const clang::Expr *enclosingCondition(const clang::Stmt &s, const clang::Stmt **body, clang::DynTypedNode *boundary);
  const clang::Expr *jumpCondition(const clang::Stmt &s, const clang::Stmt &body);
  bool encloses(const clang::Stmt &outer, const clang::Stmt &inner);
  Reach reach(const clang::Stmt &s, std::set<const void *> &seen, int depth);
  const clang::FunctionDecl *functionAround(const clang::Stmt &s);

  // A call of the project's function defined in another file: uniform when that file showed it.
  bool callElsewhere(const clang::CallExpr *call, const clang::FunctionDecl *callee, Culprit &c);
  bool readsOptimizerSettings(const clang::FunctionDecl *callee);

  clang::ASTContext &ctx_;
  const clang::SourceManager &sm_;
  OtherFiles otherFiles_;
  std::map<const clang::FunctionDecl *, Facts> facts_;
  // Per function and mode: its rank-local variables with why. While one is computed it grows to a
  // fixpoint (a variable not yet in it counts as uniform, so `i = i + 1` keeps `i` uniform); reached
  // again from another function meanwhile (recursion), it answers "in doubt".
  struct Locals {
    std::map<const clang::VarDecl *, Cause> rankLocal;
    bool done = false;
  };
  std::map<std::pair<const clang::FunctionDecl *, Mode>, Locals> locals_;
  std::vector<std::pair<const clang::FunctionDecl *, Mode>> computing_;
  struct Summary {
    bool done = false;
    bool rankLocal = false;
    const clang::Expr *returned = nullptr;
  };
  std::map<std::pair<const clang::FunctionDecl *, Mode>, Summary> summaries_;
  std::set<const clang::CXXMethodDecl *> lambdasInProgress_;
  bool indexed_ = false;
  std::map<const clang::FunctionDecl *, std::vector<const clang::Expr *>> calls_;
  std::set<const clang::FunctionDecl *> addressTaken_;
  std::map<const clang::FunctionDecl *, std::vector<const clang::Stmt *>> events_;
  std::set<const clang::FunctionDecl *> eventsInProgress_;
  std::map<const clang::FunctionDecl *, int> readsFiles_;  // 0: being computed, 1: yes, 2: no
  struct Assumption {
    clang::SourceLocation declaration;
    std::string name;
    clang::SourceLocation point;
  };
  std::vector<Assumption> assumptions_;
  std::set<const clang::VarDecl *> checkingAssumption_;
};

}  // namespace accmigrate
