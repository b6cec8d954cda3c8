#include "rules/WrapCreations.h"

#include "analysis/TorchTypes.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/TypeLoc.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {
namespace {

// The object's own class (not a pointer or reference to it), `base` or derived from it, not already
// wrapped. An abstract class is never created (torch::optim::Optimizer, LRScheduler); `base` itself is
// when it is concrete (ReduceLROnPlateauScheduler).
bool needsWrap(QualType type, StringRef base, StringRef wrapper) {
  if (type.isNull() || type->isReferenceType() || type->isPointerType() || type->isDependentType()) return false;
  const CXXRecordDecl *rd = type->getAsCXXRecordDecl();
  if (!rd || !derivesFrom(rd, base) || derivesFrom(rd, wrapper)) return false;
  const CXXRecordDecl *definition = rd->getDefinition();
  return !(definition && definition->isAbstract());
}

// The type as written where an object is created: a declaration, `new T`, `T(...)`, `T{...}`,
// make_shared<T>/make_unique<T>.
const TypeSourceInfo *writtenType(const DeclaratorDecl &d) { return d.getTypeSourceInfo(); }
const TypeSourceInfo *writtenType(const CXXNewExpr &e) { return e.getAllocatedTypeSourceInfo(); }
const TypeSourceInfo *writtenType(const CXXTemporaryObjectExpr &e) { return e.getTypeSourceInfo(); }
const TypeSourceInfo *writtenType(const CXXFunctionalCastExpr &e) { return e.getTypeInfoAsWritten(); }
const TypeSourceInfo *writtenType(const DeclRefExpr &e) {
  return e.getNumTemplateArgs() >= 1 ? e.getTemplateArgs()[0].getTypeSourceInfo() : nullptr;
}

// The type written there names a class to wrap (spelled out: `auto` deduces the wrapper by itself).
AST_POLYMORPHIC_MATCHER_P2(writesClassToWrap,
                           AST_POLYMORPHIC_SUPPORTED_TYPES(DeclaratorDecl, CXXNewExpr, CXXTemporaryObjectExpr,
                                                           CXXFunctionalCastExpr, DeclRefExpr),
                           std::string, Base, std::string, Wrapper) {
  const TypeSourceInfo *tsi = writtenType(Node);
  return tsi && needsWrap(tsi->getType(), Base, Wrapper) && !tsi->getType()->getContainedAutoType();
}

// A factory returning the object by value would slice the wrapper off: it returns the wrapper too.
AST_MATCHER_P2(FunctionDecl, returnsClassToWrap, std::string, Base, std::string, Wrapper) {
  return !Node.isTemplateInstantiation() && needsWrap(Node.getReturnType(), Base, Wrapper);
}

}  // namespace

void wrapCreations(Migration &m, StringRef baseName, StringRef wrapperName) {
  std::string base = baseName.str(), wrapper = wrapperName.str();
  auto wrap = [&m, wrapper](SourceRange range) {
    std::string spelled = m.text(range);
    if (!spelled.empty()) m.replace(range, wrapper + "<" + spelled + ">");
  };
  auto wrapWritten = [wrap](const TypeSourceInfo *tsi) { wrap(tsi->getTypeLoc().getSourceRange()); };

  m.onMatch(declaratorDecl(anyOf(varDecl(unless(parmVarDecl())), fieldDecl()), writesClassToWrap(base, wrapper))
                .bind("decl"),
            [wrapWritten](const BoundNodes &nodes) { wrapWritten(writtenType(*nodes.getNodeAs<DeclaratorDecl>("decl"))); });
  m.onMatch(cxxNewExpr(writesClassToWrap(base, wrapper)).bind("new"),
            [wrapWritten](const BoundNodes &nodes) { wrapWritten(writtenType(*nodes.getNodeAs<CXXNewExpr>("new"))); });
  m.onMatch(cxxTemporaryObjectExpr(writesClassToWrap(base, wrapper)).bind("temp"), [wrapWritten](const BoundNodes &nodes) {
    wrapWritten(writtenType(*nodes.getNodeAs<CXXTemporaryObjectExpr>("temp")));
  });
  m.onMatch(cxxFunctionalCastExpr(writesClassToWrap(base, wrapper)).bind("cast"), [wrapWritten](const BoundNodes &nodes) {
    wrapWritten(writtenType(*nodes.getNodeAs<CXXFunctionalCastExpr>("cast")));
  });
  // std::make_shared<Adam>(...), std::make_unique<Adam>(...).
  m.onMatch(declRefExpr(to(functionDecl(hasAnyName("::std::make_shared", "::std::make_unique"))),
                        writesClassToWrap(base, wrapper))
                .bind("ref"),
            [wrapWritten](const BoundNodes &nodes) { wrapWritten(writtenType(*nodes.getNodeAs<DeclRefExpr>("ref"))); });
  m.onMatch(functionDecl(returnsClassToWrap(base, wrapper)).bind("fn"), [wrap](const BoundNodes &nodes) {
    wrap(nodes.getNodeAs<FunctionDecl>("fn")->getReturnTypeSourceRange());
  });
}

}  // namespace accmigrate
