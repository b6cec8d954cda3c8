// device-declaration: the local `torch::Device device(...)` (or `= ...`) that picks the GPU becomes
// `torch::Device device = accelerator.device();`: each process gets its own device. Devices kept in
// struct fields or globals are assigned where safe and reported otherwise.
#include "Analysis.h"
#include "EditText.h"
#include "Migration.h"
#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {

// Already the accelerator's device (a second run), or deliberately the CPU (exporting, metrics).
static bool keepInitializer(Migration &m, const Expr *init) {
  return !init || isCpuDevice(init) || m.text(init->getSourceRange()).find("accelerator") != std::string::npos;
}

void applyDeviceDeclaration(Migration &m) {
  std::set<const FieldDecl *> assignedFields;
  // `options.device = torch::kCUDA;`: the struct is filled in the training code, so fill it from the
  // accelerator instead.
  m.forEachMatch(binaryOperation(hasOperatorName("="), hasLHS(memberExpr(member(fieldDecl().bind("field")))),
                                 hasRHS(expr().bind("value")))
                     .bind("assign"),
                 [&](const BoundNodes &nodes) {
    const auto *field = nodes.getNodeAs<FieldDecl>("field");
    const auto *value = nodes.getNodeAs<Expr>("value");
    const auto *assign = nodes.getNodeAs<Expr>("assign");
    if (!isDeviceClass(field->getType()) || keepInitializer(m, value)) return;
    const FunctionDecl *fn = m.enclosingFunction(*assign);
    if (!fn || isModelMethod(fn)) return;
    if (m.replace(value->getSourceRange(), "accelerator.device()")) {
      assignedFields.insert(field);
      m.useAccelerator(fn);
    }
  });

  m.forEachMatch(varDecl(unless(parmVarDecl())).bind("var"), [&](const BoundNodes &nodes) {
    const auto *var = nodes.getNodeAs<VarDecl>("var");
    if (!isDeviceClass(var->getType()) || var->getType()->isReferenceType() || keepInitializer(m, var->getInit()))
      return;
    if (!var->isLocalVarDecl() || var->isStaticLocal()) {
      m.report(var->getLocation(),
               "`" + var->getName() + "` is a device fixed before the accelerator exists",
               "make it a local `torch::Device " + var->getName() +
                   " = accelerator.device();` in the training function, or assign `" + var->getName() +
                   " = accelerator.device();` at its start");
      return;
    }
    const FunctionDecl *fn = functionOf(var);
    if (!fn || isModelMethod(fn)) return;
    SourceLocation afterName = afterToken(var->getLocation(), m.sm, m.lang);
    SourceLocation end = afterToken(var->getEndLoc(), m.sm, m.lang);
    if (m.replace(CharSourceRange::getCharRange(afterName, end), " = accelerator.device()")) m.useAccelerator(fn);
  });

  m.forEachMatch(fieldDecl().bind("field"), [&](const BoundNodes &nodes) {
    const auto *field = nodes.getNodeAs<FieldDecl>("field");
    if (!isDeviceClass(field->getType()) || field->getType()->isReferenceType() || assignedFields.count(field))
      return;
    std::string owner = field->getParent()->getNameAsString();
    m.report(field->getLocation(),
             "`" + owner + "::" + field->getName() + "` holds a device that acc-migrate cannot trace to where it is set",
             "set it from the accelerator where the " + owner + " is created: `" + field->getName() +
                 " = accelerator.device();`");
  });
}

}  // namespace accmigrate
