#include "WrapCreations.h"

#include "Migration.h"
#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/TypeLoc.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {

void wrapCreations(Migration &m, StringRef base, StringRef wrapper) {
  // The object's own class (not a pointer or reference to it), not already wrapped.
  auto needsWrap = [&](QualType type) {
    if (type.isNull() || type->isReferenceType() || type->isPointerType() || type->isDependentType()) return false;
    const CXXRecordDecl *rd = type->getAsCXXRecordDecl();
    return rd && derivesFrom(rd, base) && rd->getQualifiedNameAsString() != base &&
           !derivesFrom(rd, wrapper);
  };
  auto wrap = [&](TypeSourceInfo *tsi) {
    if (!tsi || !needsWrap(tsi->getType()) || tsi->getType()->getContainedAutoType()) return;
    SourceRange range = tsi->getTypeLoc().getSourceRange();
    std::string spelled = m.text(range);
    if (!spelled.empty()) m.replace(range, (wrapper + "<" + spelled + ">").str());
  };

  m.forEachMatch(declaratorDecl(anyOf(varDecl(unless(parmVarDecl())), fieldDecl())).bind("decl"),
                 [&](const BoundNodes &nodes) { wrap(nodes.getNodeAs<DeclaratorDecl>("decl")->getTypeSourceInfo()); });
  m.forEachMatch(cxxNewExpr().bind("new"), [&](const BoundNodes &nodes) {
    wrap(nodes.getNodeAs<CXXNewExpr>("new")->getAllocatedTypeSourceInfo());
  });
  m.forEachMatch(cxxTemporaryObjectExpr().bind("temp"), [&](const BoundNodes &nodes) {
    wrap(nodes.getNodeAs<CXXTemporaryObjectExpr>("temp")->getTypeSourceInfo());
  });
  m.forEachMatch(cxxFunctionalCastExpr().bind("cast"), [&](const BoundNodes &nodes) {
    wrap(nodes.getNodeAs<CXXFunctionalCastExpr>("cast")->getTypeInfoAsWritten());
  });
  // std::make_shared<Adam>(...), std::make_unique<Adam>(...).
  m.forEachMatch(declRefExpr(to(functionDecl(hasAnyName("::std::make_shared", "::std::make_unique")))).bind("ref"),
                 [&](const BoundNodes &nodes) {
    const auto *ref = nodes.getNodeAs<DeclRefExpr>("ref");
    if (ref->getNumTemplateArgs() >= 1) wrap(ref->getTemplateArgs()[0].getTypeSourceInfo());
  });
  // A factory returning the object by value would slice the wrapper off: it returns the wrapper too.
  m.forEachMatch(functionDecl().bind("fn"), [&](const BoundNodes &nodes) {
    const auto *fn = nodes.getNodeAs<FunctionDecl>("fn");
    if (fn->isTemplateInstantiation() || !needsWrap(fn->getReturnType())) return;
    SourceRange range = fn->getReturnTypeSourceRange();
    std::string spelled = m.text(range);
    if (!spelled.empty()) m.replace(range, (wrapper + "<" + spelled + ">").str());
  });
}

}  // namespace accmigrate
