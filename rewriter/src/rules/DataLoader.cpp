// data-loader: `torch::data::make_data_loader<S>(args...)` becomes
// `accelerator.prepare_data_loader<S>(args...)`: the same arguments, a loader that shards batches across
// processes and puts them on the device. Declarations that spell torch's loader type become `auto`.
#include "Migration.h"
#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {

static auto makeDataLoaderCall() {
  return callExpr(callee(functionDecl(hasName("::torch::data::make_data_loader"))));
}

void applyDataLoader(Migration &m) {
  m.forEachMatch(makeDataLoaderCall().bind("call"), [&](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("call");
    const auto *ref = dyn_cast<DeclRefExpr>(call->getCallee()->IgnoreImpCasts());
    if (!ref) return;
    SourceLocation begin = ref->getQualifierLoc() ? ref->getQualifierLoc().getBeginLoc()
                                                  : ref->getNameInfo().getBeginLoc();
    // Only the name changes: explicit template arguments (the sampler) and call arguments stay.
    if (m.replace(SourceRange(begin, ref->getNameInfo().getEndLoc()), "accelerator.prepare_data_loader"))
      m.useAccelerator(m.enclosingFunction(*call));
  });

  // `std::unique_ptr<StatelessDataLoader<...>> loader = make_data_loader(...)`: acc's loader has its
  // own type, so the declaration deduces it.
  auto spellsLoaderType = [](QualType type) {
    return heldClass(type, "torch::data::DataLoaderBase", nullptr) && !type->getContainedAutoType();
  };
  m.forEachMatch(varDecl(hasInitializer(hasDescendant(makeDataLoaderCall()))).bind("var"),
                 [&](const BoundNodes &nodes) {
    const auto *var = nodes.getNodeAs<VarDecl>("var");
    if (spellsLoaderType(var->getType()))
      m.replace(var->getTypeSourceInfo()->getTypeLoc().getSourceRange(), "auto");
  });
  m.forEachMatch(functionDecl(hasBody(hasDescendant(returnStmt(hasReturnValue(hasDescendant(makeDataLoaderCall()))))))
                     .bind("fn"),
                 [&](const BoundNodes &nodes) {
    const auto *fn = nodes.getNodeAs<FunctionDecl>("fn");
    if (fn->isTemplateInstantiation() || !spellsLoaderType(fn->getReturnType())) return;
    for (const FunctionDecl *decl : fn->redecls())
      if (m.inProject(decl->getLocation())) m.replace(decl->getReturnTypeSourceRange(), "auto");
    if (fn->getPreviousDecl())
      m.report(fn->getLocation(), "returns the data loader and is declared before its definition",
               "a function returning `auto` must be defined before it is called; move the definition up");
  });
}

}  // namespace accmigrate
