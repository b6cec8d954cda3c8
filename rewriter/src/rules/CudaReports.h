// A reference to the CUDA device type as written (torch::kCUDA, at::kCUDA, c10::DeviceType::CUDA),
// for the reports about hard-coded CUDA.
#pragma once
#include <clang/ASTMatchers/ASTMatchers.h>

namespace accmigrate {

inline auto cudaReference() {
  using namespace clang::ast_matchers;
  return declRefExpr(to(decl(anyOf(varDecl(hasName("::c10::kCUDA")), enumConstantDecl(hasName("::c10::DeviceType::CUDA"))))));
}

}  // namespace accmigrate
