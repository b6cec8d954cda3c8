// Rank dependence: whether a value, or whether a statement is reached, may differ between the
// processes of a distributed run. A collective (accelerator.wait_for_everyone()) that some ranks
// reach and others do not hangs the job, so a rule may insert one only where every rank gets to.
//
// Rank-uniform (the same on every process) is what can be shown to be; everything else, anything
// in doubt, is rank-local. Every launcher (acc-launch, torchrun, srun, mpirun) gives every rank the
// same arguments and environment, so uniform are:
//  - compile-time constants: literals, enumerators, `sizeof`, template arguments, constexpr values
//    and anything clang folds to a constant (`std::numeric_limits<float>::max()`);
//  - main's `argc`/`argv`, and `getenv("NAME")` with a literal NAME that is not a launch variable
//    that differs per process (RANK, LOCAL_RANK, SLURM_PROCID, CUDA_VISIBLE_DEVICES, ...:
//    isPerProcessVariable);
//  - values read from a file before training: a stream (std::ifstream, std::istringstream...) made
//    from uniform values, read (`>>`, std::getline, its members) where no training step and no file
//    write comes before the read in its function or in a loop around it, nor before the calls that
//    lead to it (beforeTraining in the .cpp says exactly what counts);
//  - accelerator.num_processes(), and what the accelerator's collectives return (reduce, gather,
//    gather_for_metrics, broadcast, check_trigger), acc::reduce/gather/broadcast;
//  - values computed only from uniform ones: operators, conversions, the standard library's
//    functions (std::stoi, std::string(...), std::min...; not its clocks, random numbers, threads or
//    file system), C's atoi/strtod/strcmp/math, tensor operators and methods on uniform tensors,
//    torch's factories (torch::tensor, zeros, full...) of uniform values;
//  - variables (locals, structs, strings, streams, tensors) whose every write is uniform and whose
//    address does not escape (a fixpoint over the function's writes; a struct counts as one value:
//    a write to any member is a write of the variable, a read of any member reads it);
//  - `const` globals from uniform values;
//  - the results of the project's own functions (bodies in the unit, outside system headers),
//    followed to any depth: a call is uniform when the function's returned values are, given which
//    of its arguments are uniform (memoized per function and set of rank-local arguments; a call
//    back into a function being analysed counts as rank-local). A non-const reference argument
//    passed to such a function is written with what the function writes into it.
//  - the results of the project's functions defined in other files of the run that returned a
//    uniform value there whatever their arguments (RuleSettings::uniformResultsElsewhere; the run
//    parses a file again once another file shows it);
//  - parameters: main's are uniform; a function called in the unit (not virtual, its address not
//    taken) has the parameter its every call passes; otherwise (its callers are in other files)
//    integral, bool and enum parameters are taken as uniform, others not. A lambda's parameters are
//    what its direct calls pass.
// Rank-local: tensors not from a collective (and their items), accelerator.process_index(),
// is_main_process() and the other per-process queries, loader batches, random numbers, the time,
// addresses, non-const globals (std::cin: launchers give stdin to one process), members of `*this`
// outside a const method being followed, calls not followed.
#pragma once
#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/Expr.h>
#include <clang/AST/Stmt.h>
#include <llvm/ADT/StringRef.h>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace accmigrate {

// What the other files of a run tell, and are told: the keys (crossFileKey) of functions whose
// result is uniform whatever their arguments, and a set collecting the functions defined elsewhere
// whose results were taken as rank-local.
struct OtherFiles {
  const std::set<std::string> *uniformResults = nullptr;
  std::set<std::string> *resultsNotSeen = nullptr;
};

class RankDependence {
 public:
  explicit RankDependence(clang::ASTContext &ctx, OtherFiles otherFiles = {});
  RankDependence(RankDependence &&) noexcept;
  ~RankDependence();

  // `e` may have a different value on different processes.
  bool isRankLocal(const clang::Expr *e);

  // The variable that makes `e` rank-local (the first rank-local operand, for a message: `loss` in
  // `loss.item<float>() < best`), or null when `e` is uniform or what makes it rank-local is not a
  // variable (`accelerator.process_index() == 0`).
  const clang::VarDecl *rankLocalVariable(const clang::Expr *e);

  // Why `e` is rank-local, as a chain a finding can print: "`best < loss` depends on `loss` (line
  // 41), computed from `model->forward(x)`, a tensor, which differs between processes"; "" when
  // `e` is uniform.
  std::string explain(const clang::Expr *e);

  // The rank-local condition that decides whether (or how often) `s` runs, or null when every rank
  // reaches it equally often: conditions of the enclosing if/while/for/do/switch, `?:`, `&&`/`||`,
  // and the conditions of a break/continue/return/goto/throw that can skip it (one before it in its
  // loop or function, or one anywhere that leaves a loop around it). Callers are followed within the
  // unit: a statement of a function is rank-local when ANY call of that function (any direct call
  // of a lambda, or the place the lambda is made) is; then the condition is in a caller.
  const clang::Expr *rankLocalCondition(const clang::Stmt &s);

  // rankLocalCondition with the calls that lead from the condition's function to `s` (outermost
  // first; empty when the condition is in `s`'s own function).
  struct Reach {
    const clang::Expr *condition = nullptr;
    std::vector<const clang::Expr *> calls;
  };
  Reach rankLocalReach(const clang::Stmt &s);

  // Why `s` is not reached alike, for a finding: "`save_best(model)` (line 30) runs under `loss <
  // best` (line 29): `loss < best` depends on ..."; "" when every rank reaches it.
  std::string explainReach(const clang::Stmt &s);

  // For a rule that inserts a collective making `var` uniform at `point` (`var =
  // accelerator.reduce(var, "mean");` after a loop), which the parsed AST does not show: every
  // reference to `var` located after `point` (expansion locations, SourceManager order of the
  // translation unit) counts as uniform, unless `var` escapes (its address taken, bound to a
  // non-const reference; for a tensor only after `point`, since the inserted assignment rebinds it
  // and earlier aliases no longer reach it) or a write of `var` after `point` is itself rank-local.
  // `var` is matched by its declaration's location, so the assumption holds for that variable in a
  // template's pattern and in all its instantiations alike. The rule must insert at a point every
  // path from the earlier rank-local writes to the later references goes through (a statement of the
  // block that holds them, as after a loop). Forgets what was computed before (cheap to recompute).
  void assumeUniformAfter(const clang::VarDecl *var, clang::SourceLocation point);

  // `def` (a function with its body in this unit) returns the same value on every process even when
  // its every argument, and its object, differ: what other files may assume of its calls. False
  // when it reads a file (whether before training depends on its callers) or returns nothing.
  bool returnsUniformWhateverArguments(const clang::FunctionDecl *def);

  // The name of `fn` across translation units: its qualified name and canonical type; "" for a
  // template or its instantiation, a function of no linkage, or main.
  static std::string crossFileKey(const clang::FunctionDecl *fn);

  // `name` is a launch variable that differs between the processes of one job (RANK, LOCAL_RANK,
  // SLURM_PROCID, OMPI_COMM_WORLD_RANK, CUDA_VISIBLE_DEVICES, HOSTNAME...).
  static bool isPerProcessVariable(llvm::StringRef name);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accmigrate
