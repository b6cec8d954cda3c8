// data-loader: `torch::data::make_data_loader<S>(args...)` becomes
// `accelerator.prepare_data_loader<S>(args...)`: the same arguments, a loader that shards batches across
// processes and puts them on the device. Declarations that spell torch's loader type become `auto`.
#include "analysis/Matchers.h"
#include "analysis/TorchTypes.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

namespace {

auto makeDataLoaderCall() { return callExpr(callee(functionDecl(hasName("::torch::data::make_data_loader")))); }

// A type that names torch's loader (std::unique_ptr<StatelessDataLoader<...>>), not `auto`.
AST_MATCHER(QualType, spellsDataLoaderType) {
  return heldClass(Node, "torch::data::DataLoaderBase", nullptr) && !Node->getContainedAutoType();
}

}  // namespace

void registerDataLoader(Migration &m) {
  m.onMatch(makeDataLoaderCall().bind("call"), [&m](const BoundNodes &nodes) {
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
  m.onMatch(varDecl(hasType(spellsDataLoaderType()), hasInitializer(hasDescendant(makeDataLoaderCall()))).bind("var"),
            [&m](const BoundNodes &nodes) {
    const auto *var = nodes.getNodeAs<VarDecl>("var");
    m.replace(var->getTypeSourceInfo()->getTypeLoc().getSourceRange(), "auto");
  });
  m.onMatch(functionDecl(unless(isTemplateInstantiation()), returns(spellsDataLoaderType()),
                         hasBody(hasDescendant(returnStmt(hasReturnValue(hasDescendant(makeDataLoaderCall()))))))
                .bind("fn"),
            [&m](const BoundNodes &nodes) {
    const auto *fn = nodes.getNodeAs<FunctionDecl>("fn");
    for (const FunctionDecl *decl : fn->redecls())
      if (m.inProject(decl->getLocation())) m.replace(decl->getReturnTypeSourceRange(), "auto");
    if (fn->getPreviousDecl())
      m.report(fn->getLocation(), "returns the data loader and is declared before its definition",
               "a function returning `auto` must be defined before it is called; move the definition up");
  });
}

}  // namespace accmigrate
