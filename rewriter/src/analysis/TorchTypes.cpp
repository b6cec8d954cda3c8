#include "analysis/TorchTypes.h"

#include <clang/AST/DeclTemplate.h>
#include <clang/AST/ExprCXX.h>

using namespace clang;

namespace accmigrate {

// The class a base specifier names; in a template's pattern (`: public DataLoaderBase<Dataset, ...>`,
// a dependent type) the class template's own record, which is all a check by name needs.
static const CXXRecordDecl *baseRecord(QualType type) {
  if (const CXXRecordDecl *rd = type->getAsCXXRecordDecl()) return rd;
  if (const auto *tst = type->getAs<TemplateSpecializationType>())
    if (const TemplateDecl *td = tst->getTemplateName().getAsTemplateDecl())
      return dyn_cast_or_null<CXXRecordDecl>(td->getTemplatedDecl());
  return nullptr;
}

bool derivesFrom(const CXXRecordDecl *rd, StringRef qualifiedName) {
  if (!rd) return false;
  if (rd->getQualifiedNameAsString() == qualifiedName) return true;
  const CXXRecordDecl *definition = rd->getDefinition();
  // A specialization nothing required complete is not instantiated (acc-migrate skips the bodies of
  // torch's functions, which would have): its template's bases say what it derives from.
  if (!definition)
    if (const auto *spec = dyn_cast<ClassTemplateSpecializationDecl>(rd))
      definition = spec->getSpecializedTemplate()->getTemplatedDecl()->getDefinition();
  if (!definition) return false;
  for (const CXXBaseSpecifier &base : definition->bases())
    if (derivesFrom(baseRecord(base.getType()), qualifiedName)) return true;
  return false;
}

const CXXRecordDecl *recordOf(QualType type) {
  if (type.isNull()) return nullptr;
  return type.getNonReferenceType()->getAsCXXRecordDecl();
}

bool isTensor(QualType type) { return derivesFrom(recordOf(type), "at::TensorBase"); }

bool isDeviceClass(QualType type) {
  const CXXRecordDecl *rd = recordOf(type);
  return rd && rd->getQualifiedNameAsString() == "c10::Device";
}

static bool isEnumNamed(QualType type, StringRef name) {
  if (type.isNull()) return false;
  const auto *et = type.getNonReferenceType()->getAs<EnumType>();
  return et && et->getDecl()->getQualifiedNameAsString() == name;
}

bool isDeviceType(QualType type) { return isEnumNamed(type, "c10::DeviceType"); }
bool isScalarType(QualType type) { return isEnumNamed(type, "c10::ScalarType"); }
// acc's prepared loader too: a loop over it in migrated code still batches from a DataLoader.
bool isDataLoader(QualType type) {
  const CXXRecordDecl *rd = recordOf(type);
  return derivesFrom(rd, "torch::data::DataLoaderBase") || derivesFrom(rd, "acc::DataLoader");
}

bool isAccelerator(QualType type) {
  const CXXRecordDecl *rd = recordOf(type);
  return rd && rd->getQualifiedNameAsString() == "acc::Accelerator";
}

// The first template argument of a class template specialization named `name`, if `rd` is one.
static QualType templateArgumentOf(const CXXRecordDecl *rd, StringRef name) {
  const auto *spec = dyn_cast_or_null<ClassTemplateSpecializationDecl>(rd);
  if (!spec || spec->getQualifiedNameAsString() != name) return {};
  const TemplateArgumentList &args = spec->getTemplateArgs();
  if (args.size() == 0 || args[0].getKind() != TemplateArgument::Type) return {};
  return args[0].getAsType();
}

// The ModuleHolder<Impl> base of a TORCH_MODULE class, if any.
static const CXXRecordDecl *holderImpl(const CXXRecordDecl *rd) {
  if (!rd) return nullptr;
  QualType impl = templateArgumentOf(rd, "torch::nn::ModuleHolder");
  if (!impl.isNull()) return impl->getAsCXXRecordDecl();
  if (!(rd = rd->getDefinition())) return nullptr;
  for (const CXXBaseSpecifier &base : rd->bases())
    if (const CXXRecordDecl *found = holderImpl(base.getType()->getAsCXXRecordDecl())) return found;
  return nullptr;
}

const CXXRecordDecl *heldClass(QualType type, StringRef base, Holding *holding) {
  if (type.isNull()) return nullptr;
  type = type.getNonReferenceType();
  Holding how = Holding::Value;
  const CXXRecordDecl *rd = nullptr;
  if (type->isPointerType()) {
    how = Holding::Pointer;
    rd = type->getPointeeType()->getAsCXXRecordDecl();
  } else if ((rd = type->getAsCXXRecordDecl())) {
    for (StringRef smart : {"std::shared_ptr", "std::unique_ptr"}) {
      QualType pointee = templateArgumentOf(rd, smart);
      if (!pointee.isNull()) {
        how = Holding::SmartPointer;
        rd = pointee->getAsCXXRecordDecl();
        break;
      }
    }
    if (how == Holding::Value)
      if (const CXXRecordDecl *impl = holderImpl(rd)) {
        how = Holding::Holder;
        rd = impl;
      }
  }
  if (!derivesFrom(rd, base)) return nullptr;
  if (holding) *holding = how;
  return rd;
}

const Expr *asWritten(const Expr *e) {
  while (e) {
    const Expr *next = e->IgnoreImplicit()->IgnoreParens();
    if (const auto *construct = dyn_cast<CXXConstructExpr>(next)) {
      // A converting constructor the compiler inserted (Device -> TensorOptions), not one spelled.
      if (!isa<CXXTemporaryObjectExpr>(construct) && construct->getNumArgs() >= 1 &&
          construct->getParenOrBraceRange().isInvalid() && !construct->isListInitialization())
        next = construct->getArg(0);
    } else if (const auto *cast = dyn_cast<CXXFunctionalCastExpr>(next)) {
      if (cast->getCastKind() == CK_ConstructorConversion) next = cast;  // spelled: keep
    } else if (const auto *call = dyn_cast<CXXMemberCallExpr>(next)) {
      if (isa<CXXConversionDecl>(call->getMethodDecl())) next = call->getImplicitObjectArgument();
    }
    if (next == e) return e;
    e = next;
  }
  return e;
}

// Calls the predicate on the expression that decides which device `e` means.
template <typename Pred>
static bool deviceMatches(const Expr *e, Pred pred, bool followVariables, int depth = 0) {
  e = asWritten(e);
  if (!e || depth > 4) return false;
  if (pred(e)) return true;
  // Device(kCPU), Device(kCUDA, 0), torch::Device("cuda:0"): the first argument decides.
  if (const auto *construct = dyn_cast<CXXConstructExpr>(e))
    return construct->getNumArgs() >= 1 && deviceMatches(construct->getArg(0), pred, followVariables, depth + 1);
  if (const auto *cast = dyn_cast<CXXFunctionalCastExpr>(e))
    return deviceMatches(cast->getSubExpr(), pred, followVariables, depth + 1);
  if (const auto *ref = dyn_cast<DeclRefExpr>(e); ref && followVariables)
    if (const auto *var = dyn_cast<VarDecl>(ref->getDecl()))
      if (!var->getType()->isReferenceType() && var->hasInit() && var->isLocalVarDecl())
        return deviceMatches(var->getInit(), pred, followVariables, depth + 1);
  return false;
}

static bool namesDeviceType(const Expr *e, StringRef constant, StringRef enumerator, StringRef text) {
  if (const auto *ref = dyn_cast<DeclRefExpr>(e)) {
    std::string name = ref->getDecl()->getQualifiedNameAsString();
    return name == ("c10::" + constant).str() || name == ("c10::DeviceType::" + enumerator).str();
  }
  if (const auto *str = dyn_cast<StringLiteral>(e))
    return str->getString() == text || str->getString().startswith((text + ":").str());
  return false;
}

bool isCpuDevice(const Expr *e) {
  return deviceMatches(e, [](const Expr *x) { return namesDeviceType(x, "kCPU", "CPU", "cpu"); }, true);
}

bool isLiteralCudaDevice(const Expr *e) {
  return deviceMatches(e, [](const Expr *x) { return namesDeviceType(x, "kCUDA", "CUDA", "cuda"); }, false);
}

bool isFunctionNamed(const FunctionDecl *fn, StringRef qualifiedName) {
  return fn && fn->getQualifiedNameAsString() == qualifiedName;
}

}  // namespace accmigrate
