// Matchers for the types and places the rules look for, so that each rule's matcher says in full
// what it matches: every rule's matchers run in one MatchFinder over one traversal of the unit, and
// a callback should get only what its rule acts on rather than reject most of what it is given.
// They answer with the same functions the rules use elsewhere (TorchTypes.h, Analysis.h), which see
// through what acc-migrate leaves uninstantiated (TorchTypes.cpp, derivesFrom).
#pragma once
#include "analysis/Analysis.h"
#include "analysis/TorchTypes.h"

#include <clang/AST/ParentMapContext.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <string>

namespace accmigrate {
namespace matchers {

// The class is `Name` (qualified, without a leading ::) or derives from it.
AST_MATCHER_P(clang::CXXRecordDecl, derivesFromClass, std::string, Name) { return derivesFrom(&Node, Name); }

AST_MATCHER(clang::QualType, isTensorType) { return isTensor(Node); }
AST_MATCHER(clang::QualType, isDeviceClassType) { return isDeviceClass(Node); }
AST_MATCHER(clang::QualType, isDeviceTypeEnum) { return isDeviceType(Node); }
AST_MATCHER(clang::QualType, isDataLoaderType) { return isDataLoader(Node); }
// A model, an optimizer: held by value, pointer, smart pointer or TORCH_MODULE holder.
AST_MATCHER(clang::QualType, holdsModel) { return moduleClass(Node) != nullptr; }
AST_MATCHER(clang::QualType, holdsOptimizer) { return optimizerClass(Node) != nullptr; }
// The type is a reference (sugar seen through).
AST_MATCHER(clang::QualType, isReferenceToAnything) { return !Node.isNull() && Node->isReferenceType(); }

// A member function of a model class (its moves follow the model's own tensors).
AST_MATCHER(clang::FunctionDecl, isModelMember) { return isModelMethod(&Node); }

// Declared inside a template (its pattern, not an instantiation).
AST_MATCHER(clang::Decl, isTemplatedDecl) { return Node.isTemplated(); }

// The call is made on an acc::Accelerator (`accelerator.prepare(...)`).
AST_MATCHER(clang::CXXMemberCallExpr, isOnAccelerator) {
  const clang::Expr *object = Node.getImplicitObjectArgument();
  return object && isAccelerator(object->getType());
}

// The statement is in the body of a function that matches `Inner`: the function as written (an
// instantiation's template), seen through lambdas (Analysis.h, enclosingFunction). Bind it to get it.
AST_MATCHER_P(clang::Stmt, inFunction, clang::ast_matchers::internal::Matcher<clang::FunctionDecl>, Inner) {
  const clang::FunctionDecl *fn = enclosingFunction(Node, Finder->getASTContext());
  return fn && Inner.matches(*fn, Finder, Builder);
}

// The nearest range-for around the statement matches `Inner` (a loop further out does not count).
AST_MATCHER_P(clang::Stmt, nearestRangeFor, clang::ast_matchers::internal::Matcher<clang::CXXForRangeStmt>,
              Inner) {
  clang::ASTContext &ctx = Finder->getASTContext();
  for (clang::DynTypedNodeList parents = ctx.getParents(Node); !parents.empty();
       parents = ctx.getParents(parents[0]))
    if (const auto *loop = parents[0].get<clang::CXXForRangeStmt>()) return Inner.matches(*loop, Finder, Builder);
  return false;
}

// The size of a libtorch dataset: an expression holding `dataset.size()`, or a variable initialised
// from one (`const size_t test_size = test_set.size().value();`), or an expression holding that.
inline auto datasetSize() {
  using namespace clang::ast_matchers;
  auto dataset = cxxRecordDecl(anyOf(isSameOrDerivedFrom("::torch::data::datasets::BatchDataset"),
                                     isSameOrDerivedFrom("::torch::data::datasets::Dataset")));
  auto sizeCall = cxxMemberCallExpr(callee(cxxMethodDecl(hasName("size"), ofClass(dataset))));
  auto mentionsSize = expr(anyOf(sizeCall, hasDescendant(sizeCall)));
  auto sizeVar = declRefExpr(to(varDecl(hasInitializer(mentionsSize))));
  return expr(anyOf(mentionsSize, sizeVar, hasDescendant(sizeVar)));
}

}  // namespace matchers
}  // namespace accmigrate
