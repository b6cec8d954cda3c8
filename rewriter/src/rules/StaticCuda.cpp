// static-cuda (report): a variable with static storage initialised on CUDA
// (`static const Tensor eps = torch::tensor(1e-16f).to(torch::kCUDA);`). It is created before main,
// before the accelerator exists, and on cuda:0 in every process. Devices themselves are reported by
// device-declaration.
#include "analysis/Matchers.h"
#include "analysis/TorchTypes.h"
#include "engine/Migration.h"
#include "rules/CudaReports.h"

#include <clang/AST/ExprCXX.h>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

void registerStaticCuda(Migration &m) {
  auto cudaCall = cxxMemberCallExpr(callee(cxxMethodDecl(hasName("cuda"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::at::TensorBase"))))));
  auto onCuda = expr(anyOf(hasDescendant(cudaReference()), hasDescendant(cudaDeviceString()), hasDescendant(cudaCall)));
  // Devices themselves are device-declaration's; a template's pattern is checked in its instantiations.
  m.onMatch(varDecl(hasGlobalStorage(), unless(hasType(qualType(anyOf(isDeviceClassType(), isDeviceTypeEnum())))),
                    unless(isTemplatedDecl()), hasInitializer(onCuda))
                .bind("var"),
            [&m](const BoundNodes &nodes) {
    const auto *var = nodes.getNodeAs<VarDecl>("var");
    m.report(var->getLocation(),
             "`" + var->getName().str() + "` is created on CUDA during static initialisation: before main and the "
             "accelerator, on cuda:0 in every process",
             "create it after `acc::Accelerator accelerator;` on `accelerator.device()` (a local, a member, or a "
             "function-local static initialised from the accelerator's device)");
  });
}

}  // namespace accmigrate
