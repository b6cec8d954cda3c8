// device-declaration: the local `torch::Device device(...)` (or `= ...`) that picks the GPU becomes
// `torch::Device device = accelerator.device();`: each process gets its own device. Devices kept in
// struct fields or globals are assigned where safe and reported otherwise.
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "analysis/TorchTypes.h"
#include "engine/EditText.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <memory>
#include <set>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {

// Already the accelerator's device (a second run), or deliberately the CPU (exporting, metrics).
static bool keepInitializer(Migration &m, const Expr *init) {
  return !init || isCpuDevice(init) || m.text(init->getSourceRange()).find("accelerator") != std::string::npos;
}

void registerDeviceDeclaration(Migration &m) {
  struct State {
    std::set<const FieldDecl *> assignedFields;  // set from the accelerator where the struct is filled
    std::vector<const FieldDecl *> fields;        // every device field, reported unless assigned
  };
  auto state = std::make_shared<State>();
  auto deviceObject = qualType(isDeviceClassType(), unless(isReferenceToAnything()));

  // `options.device = torch::kCUDA;`: the struct is filled in the training code, so fill it from the
  // accelerator instead.
  m.onMatch(expr(binaryOperation(hasOperatorName("="),
                                 hasLHS(memberExpr(member(fieldDecl(hasType(isDeviceClassType())).bind("field")))),
                                 hasRHS(expr().bind("value"))),
                 inFunction(functionDecl(unless(isModelMember())).bind("fn"))),
            [&m, state](const BoundNodes &nodes) {
    const auto *field = nodes.getNodeAs<FieldDecl>("field");
    const auto *value = nodes.getNodeAs<Expr>("value");
    const auto *fn = nodes.getNodeAs<FunctionDecl>("fn");
    if (keepInitializer(m, value)) return;
    if (m.replace(value->getSourceRange(), "accelerator.device()")) {
      state->assignedFields.insert(field);
      m.useAccelerator(fn);
    }
  });

  m.onMatch(varDecl(unless(parmVarDecl()), hasType(deviceObject)).bind("var"), [&m](const BoundNodes &nodes) {
    const auto *var = nodes.getNodeAs<VarDecl>("var");
    if (keepInitializer(m, var->getInit())) return;
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

  // Fields: reported once every assignment is known.
  m.onMatch(fieldDecl(hasType(deviceObject)).bind("field"),
            [state](const BoundNodes &nodes) { state->fields.push_back(nodes.getNodeAs<FieldDecl>("field")); });
  m.atEnd([&m, state] {
    for (const FieldDecl *field : state->fields) {
      if (state->assignedFields.count(field)) continue;
      std::string owner = field->getParent()->getNameAsString();
      m.report(field->getLocation(),
               "`" + owner + "::" + field->getName() + "` holds a device that acc-migrate cannot trace to where it is set",
               "set it from the accelerator where the " + owner + " is created: `" + field->getName() +
                   " = accelerator.device();`");
    }
  });
}

}  // namespace accmigrate
