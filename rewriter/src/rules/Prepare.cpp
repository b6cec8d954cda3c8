// prepare: one `accelerator.prepare(models..., optimizers..., schedulers...);` after the last of their
// declarations, before the training loop. The models are those whose parameters an optimizer of the
// same function holds; preparing them wraps them for DDP and places them on the device. In a class
// (a trainer), the models may be its members, and so may the optimizer, built by an assignment in a
// method (`init()`): the call goes after that assignment, and prepares the members in place.
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "analysis/TorchTypes.h"
#include "engine/EditText.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/StmtCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <memory>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

struct Prepared {
  const ValueDecl *decl;    // a local variable, or a member of the class whose method this is
  const Stmt *declaration;  // the statement of the body that declares (or assigns) it; null: a member model
  Holding holding;
  const Expr *init;         // what builds it
};

// Every variable and member of `this` that `e` mentions, following locals one step
// (`auto params = model->parameters();`).
void mentionedVariables(const Stmt *e, std::vector<const ValueDecl *> &out, int depth = 0) {
  if (!e || depth > 2) return;
  if (const auto *ref = dyn_cast<DeclRefExpr>(e))
    if (const auto *var = dyn_cast<VarDecl>(ref->getDecl())) {
      out.push_back(var);
      if (var->isLocalVarDecl() && var->hasInit()) mentionedVariables(var->getInit(), out, depth + 1);
    }
  if (const auto *member = dyn_cast<MemberExpr>(e))
    if (const auto *field = dyn_cast<FieldDecl>(member->getMemberDecl()))
      if (isa<CXXThisExpr>(member->getBase()->IgnoreParenImpCasts())) out.push_back(field);
  for (const Stmt *child : e->children()) mentionedVariables(child, out, depth);
}

// `member = <expr>;` on a member of `this`: the member and the expression.
std::pair<const FieldDecl *, const Expr *> memberAssignment(const Stmt *stmt) {
  const Expr *lhs = nullptr, *rhs = nullptr;
  if (const auto *e = dyn_cast<Expr>(stmt)) stmt = e->IgnoreImplicit();  // the temporaries' cleanups
  if (const auto *op = dyn_cast<BinaryOperator>(stmt); op && op->getOpcode() == BO_Assign)
    lhs = op->getLHS(), rhs = op->getRHS();
  else if (const auto *call = dyn_cast<CXXOperatorCallExpr>(stmt);
           call && call->getOperator() == OO_Equal && call->getNumArgs() == 2)
    lhs = call->getArg(0), rhs = call->getArg(1);
  const auto *member = lhs ? dyn_cast<MemberExpr>(lhs->IgnoreParenImpCasts()) : nullptr;
  if (!member || !isa<CXXThisExpr>(member->getBase()->IgnoreParenImpCasts())) return {};
  return {dyn_cast<FieldDecl>(member->getMemberDecl()), rhs};
}

// What the `accelerator.prepare(...)` calls already in `s` (migrated code) take.
void alreadyPrepared(const Stmt *s, std::set<const ValueDecl *> &out) {
  if (!s) return;
  if (const auto *call = dyn_cast<CXXMemberCallExpr>(s))
    if (call->getMethodDecl() && call->getMethodDecl()->getName() == "prepare" &&
        call->getImplicitObjectArgument() && isAccelerator(call->getImplicitObjectArgument()->getType()))
      for (const Expr *arg : call->arguments()) {
        std::vector<const ValueDecl *> mentioned;
        mentionedVariables(arg, mentioned, /*depth=*/2);  // the arguments themselves
        out.insert(mentioned.begin(), mentioned.end());
      }
  for (const Stmt *child : s->children()) alreadyPrepared(child, out);
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
  std::string name = p.decl->getNameAsString();
  return dereference && p.holding != Holding::Value ? "*" + name : name;
}

// Member optimizers this unit prepares (or finds prepared), and those it must report.
struct Members {
  std::set<const ValueDecl *> prepared;
  std::vector<const FieldDecl *> optimizers;
};

// `prepares`: the function calls accelerator.prepare already (migrated code): nothing is inserted,
// what needs the user is still reported.
void prepareFunction(Migration &m, const FunctionDecl *fn, const CompoundStmt *body, Members &members) {
  std::set<const ValueDecl *> prepared;
  alreadyPrepared(body, prepared);
  members.prepared.insert(prepared.begin(), prepared.end());
  bool prepares = !prepared.empty();
  std::vector<Prepared> models, optimizers, schedulers;
  for (const Stmt *stmt : body->body()) {
    if (auto [field, init] = memberAssignment(stmt); field) {
      Holding holding;
      if (optimizerClass(field->getType(), &holding)) optimizers.push_back({field, stmt, holding, init});
      continue;
    }
    const auto *declStmt = dyn_cast<DeclStmt>(stmt);
    if (!declStmt) continue;
    for (const Decl *d : declStmt->decls()) {
      const auto *var = dyn_cast<VarDecl>(d);
      if (!var || var->getType()->isReferenceType() || var->getType()->isDependentType()) continue;
      Holding holding;
      if (optimizerClass(var->getType(), &holding)) optimizers.push_back({var, stmt, holding, var->getInit()});
      else if (schedulerClass(var->getType(), &holding)) schedulers.push_back({var, stmt, holding, var->getInit()});
      else if (moduleClass(var->getType(), &holding)) models.push_back({var, stmt, holding, var->getInit()});
    }
  }
  if (optimizers.empty()) return;

  // Models whose parameters the optimizers hold (locals, or members of this method's class);
  // schedulers that drive those optimizers.
  std::vector<const ValueDecl *> mentioned;
  for (const Prepared &o : optimizers) mentionedVariables(o.init, mentioned);
  std::vector<Prepared> chosen;
  for (const Prepared &model : models)
    if (std::find(mentioned.begin(), mentioned.end(), model.decl) != mentioned.end()) chosen.push_back(model);
  for (const ValueDecl *decl : mentioned) {
    bool seen = std::any_of(chosen.begin(), chosen.end(), [&](const Prepared &p) { return p.decl == decl; });
    Holding holding;
    if (seen || !moduleClass(decl->getType(), &holding)) continue;
    if (isa<FieldDecl>(decl)) chosen.push_back({decl, nullptr, holding, nullptr});
    else if (!cast<VarDecl>(decl)->isLocalVarDecl())
      m.report(decl->getLocation(), "model `" + decl->getName() + "` is not created in `" + fn->getName() + "`",
               "prepare it where it is created, or add it to the accelerator.prepare(...) call by hand");
  }
  size_t modelCount = chosen.size();
  chosen.insert(chosen.end(), optimizers.begin(), optimizers.end());
  for (const Prepared &s : schedulers) {
    std::vector<const ValueDecl *> uses;
    mentionedVariables(s.init, uses);
    if (std::any_of(optimizers.begin(), optimizers.end(), [&](const Prepared &o) {
          return std::find(uses.begin(), uses.end(), o.decl) != uses.end();
        }))
      chosen.push_back(s);
  }

  // After the last declaration, before the first statement that trains.
  const Stmt *last = nullptr;
  for (const Prepared &p : chosen)
    if (p.declaration && (!last || m.sm.isBeforeInTranslationUnit(last->getBeginLoc(), p.declaration->getBeginLoc())))
      last = p.declaration;
  for (const Stmt *stmt : body->body()) {
    if (stmt == last) break;
    if (containsBackwardOrLoaderLoop(stmt)) {
      m.report(last->getBeginLoc(), "declared after training starts in `" + fn->getName() + "`",
               "declare models and optimizers before the training loop, then call accelerator.prepare on them");
      return;
    }
  }
  if (prepares) return;
  std::string call = "accelerator.prepare(";
  for (size_t i = 0; i < chosen.size(); ++i)
    call += (i ? ", " : "") + argument(chosen[i], /*dereference=*/i >= modelCount);
  call += ");";
  SourceLocation after = statementRange(last, m.sm, m.lang).getEnd();
  if (!m.insert(after, "\n" + lineIndent(last->getBeginLoc(), m.sm) + call)) return;
  m.useAccelerator(fn);
  for (const Prepared &p : chosen) members.prepared.insert(p.decl);
  for (size_t i = 0; i < modelCount; ++i)
    if (const auto *var = dyn_cast<VarDecl>(chosen[i].decl)) m.notePrepared(var);
}

}  // namespace

void registerPrepare(Migration &m) {
  auto members = std::make_shared<Members>();
  // Functions as written (not instantiations), not a model's own methods.
  m.onMatch(functionDecl(isDefinition(), unless(isTemplateInstantiation()), unless(isModelMember()),
                         hasBody(compoundStmt().bind("body")))
                .bind("fn"),
            [&m, members](const BoundNodes &nodes) {
    prepareFunction(m, nodes.getNodeAs<FunctionDecl>("fn"), nodes.getNodeAs<CompoundStmt>("body"), *members);
  });

  // Optimizers that live in a class (a trainer) and that no method of this unit builds by an
  // assignment are built in its constructor, out of our sight.
  m.onMatch(fieldDecl(hasType(holdsOptimizer())).bind("field"), [members](const BoundNodes &nodes) {
    members->optimizers.push_back(nodes.getNodeAs<FieldDecl>("field"));
  });
  m.atEnd([&m, members] {
    for (const FieldDecl *field : members->optimizers) {
      if (members->prepared.count(field)) continue;
      std::string owner = field->getParent()->getNameAsString();
      m.report(field->getLocation(), "optimizer `" + owner + "::" + field->getName() + "` is a class member",
               "call `accelerator.prepare(<model member>, " + field->getName() + ");` in " + owner +
                   "'s constructor body, after both are built");
    }
  });
}

}  // namespace accmigrate
