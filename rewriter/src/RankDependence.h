// Rank dependence: whether a value, or whether a statement is reached, may differ between the
// processes of a distributed run. A collective (accelerator.wait_for_everyone()) that some ranks
// reach and others do not hangs the job, so a rule may insert one only where every rank gets to.
//
// Rank-uniform (the same on every process) is what can be shown to be: literals, enumerators,
// `sizeof`, loop counters stepped by constants, function parameters of integral/bool type, variables
// whose every write (initialiser, assignments, increments) is uniform, `const` values from those,
// and operators over uniform operands. Everything else is rank-local: tensors (and `.item<T>()` of
// them), the loader's batches, accelerator.process_index()/is_main_process(), calls, members, globals,
// variables whose address escapes. A range-for over a DataLoader is uniform: a prepared loader gives
// every process the same number of batches.
#pragma once
#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/Expr.h>
#include <clang/AST/Stmt.h>
#include <map>
#include <set>

namespace accmigrate {

class RankDependence {
 public:
  explicit RankDependence(clang::ASTContext &ctx) : ctx_(ctx) {}

  // `e` may have a different value on different processes.
  bool isRankLocal(const clang::Expr *e);

  // The rank-local condition that decides whether (or how often) `s` runs, or null when every rank
  // reaches it equally often: conditions of the enclosing if/while/for/do/switch, `?:`, `&&`/`||`,
  // and the conditions of a break/continue/return/goto/throw that can skip it (one before it in its
  // loop or function, or one anywhere that leaves a loop around it). Stops at the enclosing function
  // or lambda: its callers are not looked at.
  const clang::Expr *rankLocalCondition(const clang::Stmt &s);

  // The first variable that makes `e` rank-local (for a message), or null.
  const clang::VarDecl *rankLocalVariable(const clang::Expr *e);

  // A rule made `var` the same on every process at `point` (it inserts `var = accelerator.reduce(var, ...);`
  // there): references to `var` after `point` in the translation unit count as uniform. Call before
  // any question about the function that declares `var`.
  void assumeUniformAfter(const clang::VarDecl *var, clang::SourceLocation point);

 private:
  bool isUniformVariable(const clang::VarDecl *var);
  // The rank-local variables of `fn`'s body (lambdas in it included), computed once per function.
  const std::set<const clang::VarDecl *> &rankLocalVariables(const clang::FunctionDecl *fn);
  // The innermost rank-local condition above `s` up to its function or lambda, without looking at
  // jumps; `body` gets that function's body.
  const clang::Expr *enclosingCondition(const clang::Stmt &s, const clang::Stmt **body);
  // The rank-local condition of a jump in `body` that can skip `s`, or null.
  const clang::Expr *jumpCondition(const clang::Stmt &s, const clang::Stmt &body);
  bool encloses(const clang::Stmt &outer, const clang::Stmt &inner);

  clang::ASTContext &ctx_;
  std::map<const clang::VarDecl *, clang::SourceLocation> uniformAfter_;
  // Per function: its rank-local variables. While a function is analysed its set grows to a fixpoint
  // (a variable not yet in it counts as uniform, so `i = i + 1` does not make `i` rank-local).
  std::map<const clang::FunctionDecl *, std::set<const clang::VarDecl *>> local_;
};

}  // namespace accmigrate
