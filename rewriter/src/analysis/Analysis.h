// Questions about the user's program that several rules ask: where a tensor comes from, which
// function a declaration belongs to, which statement of a block holds a node.
#pragma once
#include <clang/AST/ASTContext.h>
#include <clang/AST/Decl.h>
#include <clang/AST/Expr.h>
#include <clang/AST/Stmt.h>
#include <llvm/ADT/STLFunctionalExtras.h>

namespace accmigrate {

// The variable an expression is rooted in: `batch` for `batch.data`, `batch[0].target`, `*it`,
// `model->fc1`; null if the root is not a variable (a call, a temporary).
const clang::VarDecl *rootVariable(const clang::Expr *e);

// `e` is (computed from) a batch of a libtorch data loader: the loop variable of a range-for over a
// DataLoader, or a local initialised from one. The prepared loader puts these on the device.
bool isBatchDerived(const clang::Expr *e, clang::ASTContext &ctx, int depth = 0);

// `s` mentions a variable for which `pred` holds (`correct` in `100.0 * static_cast<double>(correct)`).
bool mentionsVariable(const clang::Stmt *s, llvm::function_ref<bool(const clang::VarDecl *)> pred);

// The function a declaration lives in (lambdas see through to the enclosing function), as written.
const clang::FunctionDecl *functionOf(const clang::Decl *d);

// The function whose body holds `node` (lambdas excluded: they see the enclosing function's
// variables), as written: instantiations map to their template.
const clang::FunctionDecl *enclosingFunction(const clang::Stmt &node, clang::ASTContext &ctx);

// `fn` is a member function of a model class (its `.to()` calls follow the model's own tensors).
bool isModelMethod(const clang::FunctionDecl *fn);

// The statement directly inside `block` that contains `node`, or null.
const clang::Stmt *childOfBlockContaining(const clang::CompoundStmt *block, const clang::Stmt *node);

// `node` is the whole of an expression statement (its value is discarded).
bool isExpressionStatement(const clang::Stmt &node, clang::ASTContext &ctx);

// The innermost block holding `node` as a direct child, if any.
const clang::CompoundStmt *parentBlock(const clang::Stmt &node, clang::ASTContext &ctx);

}  // namespace accmigrate
