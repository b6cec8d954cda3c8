// prepare: one `accelerator.prepare(models..., optimizers..., schedulers...);` after the last of their
// declarations, before the training loop. The models are those whose parameters an optimizer of the
// same function holds; preparing them wraps them for DDP and places them on the device.
#include "Analysis.h"
#include "EditText.h"
#include "Matchers.h"
#include "Migration.h"
#include "TorchTypes.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/StmtCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

struct Prepared {
  const VarDecl *var;
  const Stmt *declaration;  // the statement of the body that declares it
  Holding holding;
};

// Every variable that `e` mentions, following locals one step (`auto params = model->parameters();`).
void mentionedVariables(const Stmt *e, std::vector<const VarDecl *> &out, int depth = 0) {
  if (!e || depth > 2) return;
  if (const auto *ref = dyn_cast<DeclRefExpr>(e))
    if (const auto *var = dyn_cast<VarDecl>(ref->getDecl())) {
      out.push_back(var);
      if (var->isLocalVarDecl() && var->hasInit()) mentionedVariables(var->getInit(), out, depth + 1);
    }
  for (const Stmt *child : e->children()) mentionedVariables(child, out, depth);
}

bool containsBackwardOrLoaderLoop(const Stmt *s) {
  if (!s) return false;
  if (const auto *call = dyn_cast<CXXMemberCallExpr>(s))
    if (const CXXMethodDecl *method = call->getMethodDecl())
      if (method->getName() == "backward") return true;
  if (const auto *loop = dyn_cast<CXXForRangeStmt>(s))
    if (loop->getRangeInit() && isDataLoader(loop->getRangeInit()->getType())) return true;
  for (const Stmt *child : s->children())
    if (containsBackwardOrLoaderLoop(child)) return true;
  return false;
}

std::string argument(const Prepared &p, bool dereference) {
  std::string name = p.var->getNameAsString();
  return dereference && p.holding != Holding::Value ? "*" + name : name;
}

void prepareFunction(Migration &m, const FunctionDecl *fn, const CompoundStmt *body) {
  std::vector<Prepared> models, optimizers, schedulers;
  for (const Stmt *stmt : body->body()) {
    const auto *declStmt = dyn_cast<DeclStmt>(stmt);
    if (!declStmt) continue;
    for (const Decl *d : declStmt->decls()) {
      const auto *var = dyn_cast<VarDecl>(d);
      if (!var || var->getType()->isReferenceType() || var->getType()->isDependentType()) continue;
      Holding holding;
      if (optimizerClass(var->getType(), &holding)) optimizers.push_back({var, stmt, holding});
      else if (schedulerClass(var->getType(), &holding)) schedulers.push_back({var, stmt, holding});
      else if (moduleClass(var->getType(), &holding)) models.push_back({var, stmt, holding});
    }
  }
  if (optimizers.empty()) return;

  // Models whose parameters the optimizers hold; schedulers that drive those optimizers.
  std::vector<const VarDecl *> mentioned;
  for (const Prepared &o : optimizers) mentionedVariables(o.var->getInit(), mentioned);
  std::vector<Prepared> chosen;
  for (const Prepared &model : models)
    if (std::find(mentioned.begin(), mentioned.end(), model.var) != mentioned.end()) chosen.push_back(model);
  for (const VarDecl *var : mentioned)
    if (moduleClass(var->getType()) && !var->isLocalVarDecl() &&
        std::none_of(chosen.begin(), chosen.end(), [&](const Prepared &p) { return p.var == var; }))
      m.report(var->getLocation(), "model `" + var->getName() + "` is not created in `" + fn->getName() + "`",
               "prepare it where it is created, or add it to the accelerator.prepare(...) call by hand");
  size_t modelCount = chosen.size();
  chosen.insert(chosen.end(), optimizers.begin(), optimizers.end());
  for (const Prepared &s : schedulers) {
    std::vector<const VarDecl *> uses;
    mentionedVariables(s.var->getInit(), uses);
    if (std::any_of(optimizers.begin(), optimizers.end(), [&](const Prepared &o) {
          return std::find(uses.begin(), uses.end(), o.var) != uses.end();
        }))
      chosen.push_back(s);
  }

  // After the last declaration, before the first statement that trains.
  const Stmt *last = nullptr;
  for (const Prepared &p : chosen)
    if (!last || m.sm.isBeforeInTranslationUnit(last->getBeginLoc(), p.declaration->getBeginLoc()))
      last = p.declaration;
  for (const Stmt *stmt : body->body()) {
    if (stmt == last) break;
    if (containsBackwardOrLoaderLoop(stmt)) {
      m.report(last->getBeginLoc(), "declared after training starts in `" + fn->getName() + "`",
               "declare models and optimizers before the training loop, then call accelerator.prepare on them");
      return;
    }
  }
  std::string call = "accelerator.prepare(";
  for (size_t i = 0; i < chosen.size(); ++i)
    call += (i ? ", " : "") + argument(chosen[i], /*dereference=*/i >= modelCount);
  call += ");";
  SourceLocation after = statementRange(last, m.sm, m.lang).getEnd();
  if (!m.insert(after, "\n" + lineIndent(last->getBeginLoc(), m.sm) + call)) return;
  m.useAccelerator(fn);
  for (size_t i = 0; i < modelCount; ++i) m.notePrepared(chosen[i].var);
}

}  // namespace

void registerPrepare(Migration &m) {
  // Functions as written (not instantiations), not a model's own methods, not prepared already (a
  // migrated file).
  auto preparesAlready = hasDescendant(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("prepare"))), isOnAccelerator()));
  m.onMatch(functionDecl(isDefinition(), unless(isTemplateInstantiation()), unless(isModelMember()),
                         hasBody(compoundStmt(unless(preparesAlready)).bind("body")))
                .bind("fn"),
            [&m](const BoundNodes &nodes) {
    prepareFunction(m, nodes.getNodeAs<FunctionDecl>("fn"), nodes.getNodeAs<CompoundStmt>("body"));
  });

  // Optimizers that live in a class (a trainer) are built in its constructor, out of our sight.
  m.onMatch(fieldDecl(hasType(holdsOptimizer())).bind("field"), [&m](const BoundNodes &nodes) {
    const auto *field = nodes.getNodeAs<FieldDecl>("field");
    std::string owner = field->getParent()->getNameAsString();
    m.report(field->getLocation(), "optimizer `" + owner + "::" + field->getName() + "` is a class member",
             "call `accelerator.prepare(<model member>, " + field->getName() + ");` in " + owner +
                 "'s constructor body, after both are built");
  });
}

}  // namespace accmigrate
