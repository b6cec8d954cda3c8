// create-accelerator: one `acc::Accelerator accelerator;` per program, where the training starts
// (`main`, or without `main` in the scope each function no project function calls), passed as a first
// parameter `acc::Accelerator& accelerator` to every function on the call path to the code that uses
// it. Options other rules asked for (the fact accelerator-options) go into its constructor.
//
// One unit cannot see the calls of other files, so this finalizer decides nothing: it records the
// unit's functions and calls by USR (AcceleratorSummary.h) and makes both candidate edits of each
// function, under the decision each depends on (Migration::onlyIf): `local:<usr>` for the
// declaration at the start of its body, `param:<usr>` for the parameter at every declaration and the
// argument at every call. AcceleratorPlacement.cpp decides over the calls of all units.
#include "analysis/Analysis.h"
#include "analysis/TorchTypes.h"
#include "engine/AcceleratorPlacement.h"
#include "engine/EditText.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/TypeLoc.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Index/USRGeneration.h>
#include <map>
#include <memory>
#include <set>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {
namespace {

bool hasAccelerator(const FunctionDecl *fn) {
  for (const ParmVarDecl *p : fn->parameters())
    if (isAccelerator(p->getType())) return true;
  struct Finder : RecursiveASTVisitor<Finder> {
    bool found = false;
    bool VisitVarDecl(VarDecl *v) {
      found |= isAccelerator(v->getType());
      return true;
    }
  } finder;
  finder.TraverseStmt(fn->getBody());
  if (const auto *method = dyn_cast<CXXMethodDecl>(fn))
    for (const FieldDecl *f : method->getParent()->fields()) finder.found |= isAccelerator(f->getType());
  return finder.found;
}

void declareLocal(Migration &m, const FunctionDecl *fn) {
  const auto *body = dyn_cast_or_null<CompoundStmt>(fn->getBody());
  if (!body) return;
  std::string indent = body->body_empty() ? lineIndent(fn->getBeginLoc(), m.sm) + "  "
                                          : lineIndent(body->body_front()->getBeginLoc(), m.sm);
  // The options of this unit; the placement puts those of every unit in the one it keeps.
  m.insert(afterToken(body->getLBracLoc(), m.sm, m.lang), "\n" + indent + acceleratorDeclaration(m.acceleratorOptions()));
}

void addParameter(Migration &m, const FunctionDecl *fn) {
  for (const FunctionDecl *decl : fn->redecls()) {
    if (!m.inProject(decl->getLocation())) continue;
    FunctionTypeLoc loc = decl->getFunctionTypeLoc();
    if (!loc) continue;
    m.insert(afterToken(loc.getLParenLoc(), m.sm, m.lang),
             decl->getNumParams() ? "acc::Accelerator& accelerator, " : "acc::Accelerator& accelerator");
  }
}

void passArgument(Migration &m, const CallExpr *call) {
  unsigned first = isa<CXXOperatorCallExpr>(call) ? 1 : 0;
  for (unsigned i = first; i < call->getNumArgs(); ++i) {
    const Expr *arg = call->getArg(i);
    if (isa<CXXDefaultArgExpr>(arg)) break;
    m.insert(arg->getBeginLoc(), "accelerator, ");
    return;
  }
  m.insert(call->getRParenLoc(), "accelerator");
}

std::string usrOf(Migration &m, const FunctionDecl *fn) {
  SmallString<128> usr;
  if (index::generateUSRForDecl(fn, usr)) return "";
  // Every program's `main` has one USR: a scope with several programs has one `main` per file.
  if (fn->isMain())
    if (OptionalFileEntryRef entry = m.sm.getFileEntryRefForID(m.sm.getFileID(m.sm.getExpansionLoc(fn->getLocation())))) {
      usr += "@";
      usr += entry->getName();
    }
  return std::string(usr);
}

// The unit's project functions (canonical, as written) and the calls between them.
struct Unit {
  std::map<const FunctionDecl *, std::vector<const CallExpr *>> callsTo;  // callee -> its calls
  std::set<const FunctionDecl *> callers;
  std::vector<std::pair<const FunctionDecl *, const FunctionDecl *>> edges;  // in the order found
  std::set<std::pair<const FunctionDecl *, const FunctionDecl *>> seenEdges;
  std::vector<const FunctionDecl *> mains;
};

const FunctionDecl *canonical(const FunctionDecl *fn) {
  fn = Migration::asWrittenFunction(fn);
  return fn ? fn->getCanonicalDecl() : nullptr;
}

// Once every rule has said which functions use the accelerator.
void summarize(Migration &m, Unit &unit) {
  std::set<const FunctionDecl *> users;
  for (const FunctionDecl *fn : m.acceleratorUsers()) users.insert(canonical(fn));
  std::vector<const FunctionDecl *> functions;  // in the order first seen: the edits' order
  std::set<const FunctionDecl *> seen;
  auto add = [&](const FunctionDecl *fn) {
    if (seen.insert(fn).second) functions.push_back(fn);
  };
  for (const FunctionDecl *fn : m.acceleratorUsers()) add(canonical(fn));
  for (const FunctionDecl *fn : unit.mains) add(fn);
  for (auto &[caller, callee] : unit.edges) add(caller), add(callee);

  AcceleratorSummary &summary = m.acceleratorSummary();
  summary.options = m.acceleratorOptions();
  for (auto &[caller, callee] : unit.edges) {
    std::string from = usrOf(m, caller), to = usrOf(m, callee);
    if (!from.empty() && !to.empty()) summary.calls.emplace_back(from, to);
  }
  for (const FunctionDecl *fn : functions) {
    const FunctionDecl *definition = nullptr;
    bool defined = fn->hasBody(definition) && m.inProject(definition->getLocation());
    const FunctionDecl *shown = defined ? definition : fn;
    PlacedFunction placed;
    placed.usr = usrOf(m, fn);
    if (placed.usr.empty()) continue;
    placed.name = fn->getNameAsString();
    SourceLocation at = m.sm.getExpansionLoc(shown->getLocation());
    if (OptionalFileEntryRef entry = m.sm.getFileEntryRefForID(m.sm.getFileID(at))) placed.file = entry->getName().str();
    placed.line = m.sm.getSpellingLineNumber(at);
    placed.column = m.sm.getSpellingColumnNumber(at);
    placed.usesAccelerator = users.count(fn) > 0;
    placed.hasAccelerator = defined && hasAccelerator(definition);
    placed.isMain = fn->isMain();
    const auto *method = dyn_cast<CXXMethodDecl>(fn);
    placed.isVirtual = method && method->isVirtual();
    summary.functions.push_back(placed);
    if (placed.hasAccelerator) continue;
    // A function that calls nothing of the project and uses no accelerator never declares one.
    if (defined && (placed.usesAccelerator || unit.callers.count(fn)))
      m.onlyIf({"local:" + placed.usr}, [&] { declareLocal(m, definition); });
    if (!placed.isMain && !placed.isVirtual)
      m.onlyIf({"param:" + placed.usr}, [&] {
        addParameter(m, fn);
        for (const CallExpr *call : unit.callsTo[fn]) passArgument(m, call);
      });
  }
}

}  // namespace

void registerCreateAccelerator(Migration &m) {
  auto unit = std::make_shared<Unit>();
  // Calls from a project function to a project function, by the function called (as written).
  m.onMatch(callExpr(callee(functionDecl())).bind("call"), [&m, unit](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("call");
    const FunctionDecl *callee = canonical(call->getDirectCallee());
    if (!callee || !m.inProject(callee->getLocation())) return;
    const FunctionDecl *caller = canonical(m.enclosingFunction(*call));
    if (!caller) return;
    unit->callsTo[callee].push_back(call);
    unit->callers.insert(caller);
    if (unit->seenEdges.emplace(caller, callee).second) unit->edges.emplace_back(caller, callee);
  });
  m.onMatch(functionDecl(isMain(), isDefinition()).bind("main"), [unit](const BoundNodes &nodes) {
    unit->mains.push_back(nodes.getNodeAs<FunctionDecl>("main")->getCanonicalDecl());
  });
  m.atEnd([&m, unit] { summarize(m, *unit); });
}

}  // namespace accmigrate
