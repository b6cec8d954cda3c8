// out-of-scope (report): training code the tool cannot reach, so that a run that changes nothing
// does not look like success.
// - A project header (a user header, not a system one, that mentions torch) that a source of the scope
//   includes but that lies outside the scope: its training code is neither read nor edited.
// - A `backward` call that no rule migrated: its function uses no accelerator in any unit of the run
//   (a template that no source of the scope instantiates with a tensor, so its types are unknown).
//   Whether another unit migrated it is known only after all units: the finding holds only if that
//   function is not an accelerator user anywhere (AcceleratorPlacement.h, `!uses:<usr>`).
#include "analysis/Matchers.h"
#include "engine/Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <clang/Basic/SourceManager.h>
#include <clang/Index/USRGeneration.h>
#include <llvm/Support/Path.h>
#include <memory>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;

namespace accmigrate {
namespace {

void reportHeadersOutOfScope(Migration &m) {
  for (unsigned i = 0, n = m.sm.local_sloc_entry_size(); i < n; ++i) {
    const SrcMgr::SLocEntry &entry = m.sm.getLocalSLocEntry(i);
    if (!entry.isFile()) continue;
    const SrcMgr::FileInfo &info = entry.getFile();
    SourceLocation includedAt = info.getIncludeLoc();
    if (includedAt.isInvalid() || !m.inProject(includedAt) || info.getFileCharacteristic() != SrcMgr::C_User) continue;
    const FileEntry *file = info.getContentCache().OrigEntry;
    if (!file) continue;
    SourceLocation start = SourceLocation::getFromRawEncoding(entry.getOffset());
    if (m.inProject(start)) continue;
    auto text = m.sm.getBufferDataOrNone(m.sm.getFileID(start));
    if (!text || !text->contains("torch")) continue;  // not training code
    StringRef name = file->getName();
    m.report(includedAt, "project header `" + name + "` is outside the scope: its training code is not migrated",
             "widen the scope to include it (e.g. `acc-migrate " + llvm::sys::path::parent_path(name) +
                 " ...`, or their common directory)");
  }
}

std::string usrOf(const FunctionDecl *fn) {
  SmallString<128> usr;
  if (!fn || index::generateUSRForDecl(fn->getCanonicalDecl(), usr)) return "";
  return std::string(usr);
}

}  // namespace

void registerOutOfScope(Migration &m) {
  using Calls = std::vector<std::pair<const FunctionDecl *, SourceLocation>>;
  auto calls = std::make_shared<Calls>();
  // A tensor's backward, or a `.backward()` whose object's type a template leaves unknown.
  auto backward =
      stmt(anyOf(cxxMemberCallExpr(callee(cxxMethodDecl(
                     hasName("backward"), ofClass(cxxRecordDecl(isSameOrDerivedFrom("::at::TensorBase")))))),
                 callExpr(callee(cxxDependentScopeMemberExpr(hasMemberName("backward"))))));
  m.onMatch(stmt(backward, matchers::inFunction(functionDecl().bind("fn"))).bind("call"),
            [calls](const BoundNodes &nodes) {
              calls->emplace_back(nodes.getNodeAs<FunctionDecl>("fn"), nodes.getNodeAs<Stmt>("call")->getBeginLoc());
            });
  m.atEnd([&m, calls] {
    reportHeadersOutOfScope(m);
    for (const auto &[fn, at] : *calls) {
      if (m.usesAccelerator(fn) || at.isMacroID()) continue;  // a macro: backward reports it
      std::string usr = usrOf(fn);
      if (usr.empty()) continue;
      m.onlyIf({"!uses:" + usr}, [&] {
        m.report(at, "`backward` in `" + fn->getName() + "` was not migrated: no source of the scope trains through it",
                 "widen the scope to the sources that call `" + fn->getName() +
                     "` (a template is migrated where it is instantiated), or write `accelerator.backward(loss)` "
                     "by hand");
      });
    }
  });
}

}  // namespace accmigrate
