// A CUDA device as written: a reference to the CUDA device type (torch::kCUDA, at::kCUDA,
// c10::DeviceType::CUDA), or a device string ("cuda", "cuda:1") that constructs a c10::Device
// (torch::Device("cuda:0")), for the reports about hard-coded CUDA.
#pragma once
#include "analysis/TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
#include <clang/ASTMatchers/ASTMatchers.h>

namespace accmigrate {

inline auto cudaReference() {
  using namespace clang::ast_matchers;
  return declRefExpr(
      to(decl(anyOf(varDecl(hasName("::c10::kCUDA")), enumConstantDecl(hasName("::c10::DeviceType::CUDA"))))));
}

// "cuda" or "cuda:N", the argument of a c10::Device construction (through the std::string it
// converts to).
AST_MATCHER(clang::StringLiteral, constructsCudaDevice) {
  llvm::StringRef text = Node.getString();
  if (text != "cuda" && !text.startswith("cuda:")) return false;
  clang::ASTContext &ctx = Finder->getASTContext();
  for (clang::DynTypedNodeList parents = ctx.getParents(Node); !parents.empty(); parents = ctx.getParents(parents[0])) {
    const auto *e = parents[0].get<clang::Expr>();
    if (!e) return false;
    if (isDeviceClass(e->getType()) &&
        (llvm::isa<clang::CXXConstructExpr>(e) || llvm::isa<clang::CXXFunctionalCastExpr>(e)))
      return true;
    if (!llvm::isa<clang::ImplicitCastExpr>(e) && !llvm::isa<clang::CXXConstructExpr>(e) &&
        !llvm::isa<clang::MaterializeTemporaryExpr>(e) && !llvm::isa<clang::CXXBindTemporaryExpr>(e))
      return false;
  }
  return false;
}

inline auto cudaDeviceString() {
  using namespace clang::ast_matchers;
  return stringLiteral(constructsCudaDevice());
}

}  // namespace accmigrate
