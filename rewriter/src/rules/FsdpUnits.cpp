// fsdp-units (off by default; --fsdp-units=TypeA,TypeB enables it and names the types): FSDP
// FULL_SHARD gathers a unit's parameters before its forward and releases them after. Python does that
// with forward hooks; C++ modules have none, so a unit whose forward its parent calls directly needs
// the runtime's seam as the first statement of that forward:
//   acc::ForwardHooksGuard forward_hooks(*this);
// (<acc/hooks.h>, included by <acc/acc.h>: its constructor runs the module's pre-forward hooks, its
// destructor the post-forward ones.) For each named type the class is the one of that name, or of
// that name + "Impl" (TORCH_MODULE(Block) makes Block a holder of BlockImpl: users name either), that
// derives from torch::nn::Module; every forward of it with a body gets the line, in-class or out of
// line, overloads and member templates included (their definition as written; instantiations are the
// same text). A class template's forward is edited in the template (`*this` is the unit whatever its
// arguments), once; when its Module base depends on the arguments, only an instantiation shows it is
// a module, so a template nothing instantiates with a Module base is not matched. A body that already
// declares an acc::ForwardHooksGuard is left alone (a second run changes nothing); a const or static
// forward and a function-try-block are reported (the guard needs the module, non-const).
// The edit spells acc::, so the file is among files-using-acc: include-acc adds <acc/acc.h> and
// cmake-link links acc. Which names a unit found goes to UnitResult::fsdpUnitsFound; acc-migrate
// warns, after the run, about a name that no unit found.
#include "analysis/Matchers.h"
#include "engine/EditText.h"
#include "engine/Migration.h"

#include <clang/AST/DeclCXX.h>
#include <clang/AST/StmtCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <llvm/ADT/StringRef.h>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

constexpr llvm::StringLiteral kGuard = "acc::ForwardHooksGuard forward_hooks(*this);";

// `qualified` (a class's qualified name) is `name` as the user gives it: the same, or ending in
// `::name` (`Block` names `net::Block`; `net::Block` names `net::Block` only).
bool namedAs(llvm::StringRef qualified, llvm::StringRef name) {
  name.consume_front("::");
  return qualified == name || (qualified.endswith(name) && qualified.drop_back(name.size()).endswith("::"));
}

// `s` declares an acc::ForwardHooksGuard (anywhere in it: the user may have written it elsewhere
// than first).
bool declaresGuard(const Stmt *s) {
  if (!s) return false;
  if (const auto *decls = dyn_cast<DeclStmt>(s))
    for (const Decl *d : decls->decls())
      if (const auto *var = dyn_cast<VarDecl>(d))
        if (const CXXRecordDecl *rd = recordOf(var->getType()))
          if (rd->getQualifiedNameAsString() == "acc::ForwardHooksGuard") return true;
  for (const Stmt *child : s->children())
    if (declaresGuard(child)) return true;
  return false;
}

// Inserts the guard as the first statement of `body`: on its own line after the `{` when the `{`
// ends its line, indented like the line that follows (the first statement, or a comment before it);
// else right after the `{` (`{ return x; }`).
bool insertGuard(Migration &m, const CompoundStmt *body) {
  SourceLocation lbrace = body->getLBracLoc();
  if (lbrace.isMacroID()) return m.insert(lbrace, kGuard);  // reported: never edited in a macro
  FileID file = m.sm.getFileID(lbrace);
  StringRef buffer = m.sm.getBufferData(file);
  size_t afterBrace = m.sm.getFileOffset(lbrace) + 1;
  size_t eol = buffer.find('\n', afterBrace);
  StringRef rest = buffer.slice(afterBrace, eol).trim();
  SourceLocation start = m.sm.getLocForStartOfFile(file);
  if (eol == StringRef::npos || !(rest.empty() || rest.startswith("//"))) {
    std::string text = " " + kGuard.str();
    if (rest.startswith("}")) text += " ";
    return m.insert(start.getLocWithOffset(afterBrace), text);
  }
  // The first line after the `{` that is not blank gives the indentation; the closing `}` (an
  // empty body) gives its own, one level in.
  size_t next = eol + 1, line = next;
  while (line < buffer.size()) {
    size_t end = buffer.find('\n', line);
    if (end == StringRef::npos) end = buffer.size();
    if (!buffer.slice(line, end).trim().empty()) break;
    line = end + 1;
  }
  std::string indent = lineIndent(start.getLocWithOffset(std::min(line, buffer.size())), m.sm);
  if (line < buffer.size() && buffer.substr(line).ltrim().startswith("}")) indent += "  ";
  return m.insert(start.getLocWithOffset(next), indent + kGuard.str() + "\n");
}

}  // namespace

void registerFsdpUnits(Migration &m) {
  const std::vector<std::string> &types = m.settings.fsdpUnits;
  if (types.empty()) return;       // --rules=all without --fsdp-units: nothing named, nothing to do
  std::vector<std::string> names;  // each type as given and with Impl
  for (const std::string &type : types) {
    names.push_back(llvm::StringRef(type).ltrim(':').str());
    names.push_back(names.back() + "Impl");
  }
  // Bodies already handled: a header's class comes once per unit, but the traversal also visits
  // the instantiations of templates, whose bodies have the template's locations.
  auto done = std::make_shared<std::set<SourceLocation>>();
  auto unit = cxxRecordDecl(hasAnyName(std::vector<llvm::StringRef>(names.begin(), names.end())),
                            derivesFromClass("torch::nn::Module"))
                  .bind("unit");
  m.onMatch(cxxMethodDecl(hasName("forward"), isDefinition(), ofClass(unit)).bind("forward"),
            [&m, types, done](const BoundNodes &nodes) {
    const auto *record = nodes.getNodeAs<CXXRecordDecl>("unit");
    // The text as written: an instantiation's is its template's (a template whose Module base depends
    // on its arguments is seen to be a module only in its instantiations).
    const auto *forward = dyn_cast<CXXMethodDecl>(
        Migration::asWrittenFunction(nodes.getNodeAs<CXXMethodDecl>("forward")));
    if (!forward || !forward->doesThisDeclarationHaveABody()) return;
    std::string qualified = record->getQualifiedNameAsString();
    for (const std::string &type : types)
      if (namedAs(qualified, type) || namedAs(qualified, type + "Impl")) m.fsdpUnitsFound().insert(type);
    if (!done->insert(forward->getLocation()).second) return;
    std::string unitName = record->getNameAsString();
    if (forward->isStatic() || forward->isConst()) {
      m.report(forward->getLocation(),
               "FSDP unit " + unitName + "'s forward is " + (forward->isStatic() ? "static" : "const") +
                   ": acc::ForwardHooksGuard runs the hooks of the module it is given, which FSDP FULL_SHARD "
                   "uses to gather this unit's parameters around its forward",
               "make it a non-static, non-const member function and start it with `" + kGuard + "`");
      return;
    }
    const auto *body = dyn_cast_or_null<CompoundStmt>(forward->getBody());
    if (!body) {  // a function-try-block
      m.report(forward->getLocation(),
               "FSDP unit " + unitName + "'s forward is a function-try-block, which acc-migrate does not edit",
               "start its body with `" + kGuard + "`");
      return;
    }
    if (declaresGuard(body)) return;
    if (!insertGuard(m, body)) return;
    m.report(forward->getLocation(),
             "the forward of FSDP unit " + unitName + " now starts with acc::ForwardHooksGuard",
             "FSDP FULL_SHARD gathers this unit's parameters before its forward and releases them after; C++ "
             "modules have no forward hooks, so the guard runs the ones FSDP registers (keep it the first "
             "statement, for as long as the unit is called directly by its parent)",
             Finding::Level::Note);
  });
}

}  // namespace accmigrate
