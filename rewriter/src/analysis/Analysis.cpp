#include "analysis/Analysis.h"

#include "analysis/TorchTypes.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/AST/StmtCXX.h>

using namespace clang;

namespace accmigrate {

const VarDecl *rootVariable(const Expr *e) {
  while (e) {
    // Temporaries of a class with a destructor (at::Tensor) come bound: `x.to(kF32).to(device)`.
    for (const Expr *seen = nullptr; seen != e;) seen = e, e = e->IgnoreImplicit()->IgnoreParens();
    if (const auto *ref = dyn_cast<DeclRefExpr>(e)) return dyn_cast<VarDecl>(ref->getDecl());
    if (const auto *member = dyn_cast<MemberExpr>(e)) e = member->getBase();
    else if (const auto *call = dyn_cast<CXXMemberCallExpr>(e)) e = call->getImplicitObjectArgument();
    else if (const auto *op = dyn_cast<CXXOperatorCallExpr>(e)) e = op->getNumArgs() ? op->getArg(0) : nullptr;
    else if (const auto *sub = dyn_cast<ArraySubscriptExpr>(e)) e = sub->getBase();
    else if (const auto *un = dyn_cast<UnaryOperator>(e)) e = un->getSubExpr();
    else if (const auto *temp = dyn_cast<MaterializeTemporaryExpr>(e)) e = temp->getSubExpr();
    else if (const auto *construct = dyn_cast<CXXConstructExpr>(e)) e = construct->getNumArgs() == 1 ? construct->getArg(0) : nullptr;
    else return nullptr;
  }
  return nullptr;
}

static bool isLoaderLoopVariable(const VarDecl *var, ASTContext &ctx) {
  for (const DynTypedNode &parent : ctx.getParents(*var)) {
    const auto *declStmt = parent.get<DeclStmt>();
    if (!declStmt) continue;
    for (const DynTypedNode &grand : ctx.getParents(*declStmt))
      if (const auto *loop = grand.get<CXXForRangeStmt>())
        if (loop->getLoopVarStmt() == declStmt && loop->getRangeInit() &&
            isDataLoader(loop->getRangeInit()->getType()))
          return true;
  }
  return false;
}

bool isBatchDerived(const Expr *e, ASTContext &ctx, int depth) {
  const VarDecl *var = rootVariable(e);
  if (!var || depth > 4) return false;
  if (isLoaderLoopVariable(var, ctx)) return true;
  // `auto data = batch.data;` then `data.to(device)`.
  return var->isLocalVarDecl() && var->hasInit() && !isa<ParmVarDecl>(var) &&
         isBatchDerived(var->getInit(), ctx, depth + 1);
}

bool mentionsVariable(const Stmt *s, llvm::function_ref<bool(const VarDecl *)> pred) {
  if (!s) return false;
  if (const auto *ref = dyn_cast<DeclRefExpr>(s))
    if (const auto *var = dyn_cast<VarDecl>(ref->getDecl()); var && pred(var)) return true;
  for (const Stmt *child : s->children())
    if (mentionsVariable(child, pred)) return true;
  return false;
}

const FunctionDecl *functionOf(const Decl *d) {
  for (const DeclContext *dc = d->getDeclContext(); dc; dc = dc->getParent()) {
    const auto *fn = dyn_cast<FunctionDecl>(dc);
    if (!fn) continue;
    const auto *method = dyn_cast<CXXMethodDecl>(fn);
    if (method && method->getParent()->isLambda()) continue;
    return Migration::asWrittenFunction(fn);
  }
  return nullptr;
}

const FunctionDecl *enclosingFunction(const Stmt &node, ASTContext &ctx) {
  DynTypedNodeList parents = ctx.getParents(node);
  while (!parents.empty()) {
    const DynTypedNode &parent = parents[0];
    if (const auto *fn = parent.get<FunctionDecl>()) {
      const auto *method = dyn_cast<CXXMethodDecl>(fn);
      if (!method || !method->getParent()->isLambda()) return Migration::asWrittenFunction(fn);
    }
    parents = ctx.getParents(parent);
  }
  return nullptr;
}

bool isModelMethod(const FunctionDecl *fn) {
  const auto *method = dyn_cast_or_null<CXXMethodDecl>(fn);
  return method && derivesFrom(method->getParent(), "torch::nn::Module");
}

const Stmt *childOfBlockContaining(const CompoundStmt *block, const Stmt *node) {
  SourceRange range = node->getSourceRange();
  for (const Stmt *child : block->body()) {
    SourceRange c = child->getSourceRange();
    if (c.getBegin() == range.getBegin() || (!(range.getBegin() < c.getBegin()) && !(c.getEnd() < range.getEnd())))
      return child;
  }
  return nullptr;
}

// Skips the nodes the compiler wraps around a full expression.
static DynTypedNodeList semanticParents(const Stmt &node, ASTContext &ctx, const Stmt **through) {
  DynTypedNodeList parents = ctx.getParents(node);
  *through = &node;
  while (!parents.empty()) {
    const Stmt *p = parents[0].get<Stmt>();
    if (!p || !(isa<ExprWithCleanups>(p) || isa<ImplicitCastExpr>(p) || isa<MaterializeTemporaryExpr>(p) ||
                isa<CXXBindTemporaryExpr>(p)))
      break;
    *through = p;
    parents = ctx.getParents(*p);
  }
  return parents;
}

bool isExpressionStatement(const Stmt &node, ASTContext &ctx) {
  const Stmt *through;
  DynTypedNodeList parents = semanticParents(node, ctx, &through);
  return !parents.empty() && parents[0].get<CompoundStmt>();
}

const CompoundStmt *parentBlock(const Stmt &node, ASTContext &ctx) {
  const Stmt *through;
  DynTypedNodeList parents = semanticParents(node, ctx, &through);
  return parents.empty() ? nullptr : parents[0].get<CompoundStmt>();
}

}  // namespace accmigrate
