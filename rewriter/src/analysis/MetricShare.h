// What a value computed from one process's batches stands for across the processes of a run, so
// that a rule can turn it back into the value one process computed over the whole data:
//
// - Sum: a sum over this process's samples (a count of correct predictions, a loss with
//   Reduction::Sum, the number of samples `batch.target.size(0)`). The whole data's value is the
//   sum over processes: `accelerator.reduce(x, "sum")`.
// - Mean: a mean over this process's samples (a loss with the default mean reduction, `.mean()`),
//   or a sum of such means over batches. A prepared loader gives every process as many batches of
//   as many samples, so the value over the global batch is the mean over processes:
//   `accelerator.reduce(x, "mean")`.
// - Uniform: the same on every process (RankDependence.h): nothing to do.
// - Unknown: anything else (a ratio of counts, a maximum, a tensor of unknown origin). No rule
//   reduces it; the rules report it where it matters.
//
// Arithmetic keeps a share where it is linear over processes: Mean + Mean, Mean + Uniform,
// Sum + Sum, a share times or divided by a uniform value, and a mean times a count of samples
// (`loss.item<double>() * data.size(0)`, the batch's total: Sum).
#pragma once
#include "analysis/RankDependence.h"

#include <clang/AST/ASTContext.h>
#include <clang/AST/Expr.h>
#include <map>

namespace accmigrate {

enum class Share { Uniform, Sum, Mean, Unknown };

// "sum" or "mean": the reduction of accelerator.reduce that recovers a Sum or a Mean.
const char *reductionFor(Share share);

class MetricShares {
 public:
  MetricShares(clang::ASTContext &ctx, RankDependence &ranks) : ctx_(ctx), ranks_(ranks) {}

  // The share of a number or a tensor (see above).
  Share of(const clang::Expr *e) { return of(e, 0); }

  // `tensor` holds this process's samples along its first dimension: a loader batch, or computed
  // from one (`model->forward(batch.data).argmax(1)`, through local variables).
  bool isPerSample(const clang::Expr *tensor) { return isPerSample(tensor, 0); }

 private:
  Share of(const clang::Expr *e, int depth);
  Share ofCall(const clang::CallExpr *call, int depth);
  Share ofVariable(const clang::VarDecl *var, int depth);
  bool isPerSample(const clang::Expr *e, int depth);
  // `var` is written only by its initializer (no assignment, increment or escape in its function).
  bool writtenOnce(const clang::VarDecl *var);

  clang::ASTContext &ctx_;
  RankDependence &ranks_;
  std::map<const clang::VarDecl *, bool> writtenOnce_;
};

}  // namespace accmigrate
