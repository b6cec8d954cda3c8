// every-rank-side-effect (report): what every process does that only one should, other than
// torch::save (save-on-main-process rewrites that), in functions that use the accelerator (the fact
// accelerator-users):
// - writing files: constructing a std::ofstream with a name or open()ing one, fopen in a write or
//   append mode, std::filesystem::create_*/remove/remove_all/rename, and writers whose name says
//   write/save/dump (cv::imwrite, stbi_write_png, a project's save_image): N processes write the
//   same file at once;
// - progress counters that assume the whole dataset: a count stepped in a loop over a DataLoader
//   compared with the dataset's size (directly or through a variable initialised from it): each
//   process sees only its shard, so it never reaches the total.
// Reported, not rewritten: which process should write, or whether each should write its own file,
// is the author's call. Statements already under `is_main_process()`/`process_index()` are left alone.
#include "Matchers.h"
#include "Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/StmtCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <memory>
#include <set>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

struct SideEffect {
  SourceLocation at;
  const FunctionDecl *fn;
  std::string reason, suggestion;
};

const char *const kOnMainProcess =
    "do it on the main process only: `if (accelerator.is_main_process()) { ... }`, or give each process its own "
    "file (`accelerator.process_index()` in its name)";

// Some enclosing `if` already picks a process (a migrated file, or code written for several ranks).
bool underProcessCheck(const Stmt &s, Migration &m) {
  for (DynTypedNodeList parents = m.ctx.getParents(s); !parents.empty(); parents = m.ctx.getParents(parents[0]))
    if (const auto *ifStmt = parents[0].get<IfStmt>()) {
      std::string condition = m.text(ifStmt->getCond()->getSourceRange());
      if (condition.find("is_main_process") != std::string::npos ||
          condition.find("is_local_main_process") != std::string::npos ||
          condition.find("process_index") != std::string::npos)
        return true;
    }
  return false;
}

// fopen's mode writes: "w", "a" or an update mode ("r+").
bool writesMode(const Expr *mode) {
  const auto *literal = dyn_cast<StringLiteral>(mode->IgnoreParenImpCasts());
  return !literal || literal->getString().find_first_of("wa+") != StringRef::npos;
}

}  // namespace

void registerEveryRankSideEffect(Migration &m) {
  auto found = std::make_shared<std::vector<SideEffect>>();
  auto note = [&m, found](const Stmt &s, const FunctionDecl *fn, std::string reason, std::string suggestion) {
    if (!underProcessCheck(s, m)) found->push_back({s.getBeginLoc(), fn, std::move(reason), std::move(suggestion)});
  };
  auto inFn = inFunction(functionDecl().bind("fn"));

  auto ofstream = cxxRecordDecl(hasName("::std::basic_ofstream"));
  auto namedFileConstructor = cxxConstructorDecl(
      ofClass(ofstream), unless(anyOf(isDefaultConstructor(), isCopyConstructor(), isMoveConstructor())));
  m.onMatch(cxxConstructExpr(hasDeclaration(namedFileConstructor), inFn).bind("effect"),
            [note](const BoundNodes &nodes) {
              note(*nodes.getNodeAs<Stmt>("effect"), nodes.getNodeAs<FunctionDecl>("fn"),
                   "std::ofstream writes a file on every process (all of them write the same file)", kOnMainProcess);
            });
  m.onMatch(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("open"), ofClass(ofstream))), inFn).bind("effect"),
            [note](const BoundNodes &nodes) {
              note(*nodes.getNodeAs<Stmt>("effect"), nodes.getNodeAs<FunctionDecl>("fn"),
                   "std::ofstream::open writes a file on every process (all of them write the same file)",
                   kOnMainProcess);
            });
  m.onMatch(
      callExpr(callee(functionDecl(hasAnyName("::fopen", "::std::fopen"))), argumentCountIs(2), inFn).bind("effect"),
      [note](const BoundNodes &nodes) {
        const auto *call = nodes.getNodeAs<CallExpr>("effect");
        if (!writesMode(call->getArg(1))) return;
        note(*call, nodes.getNodeAs<FunctionDecl>("fn"),
             "fopen for writing writes a file on every process (all of them write the same file)", kOnMainProcess);
      });
  auto fileSystem =
      functionDecl(matchesName("^::std::(__fs::)?filesystem::(.*::)?(create_[a-z_]+|remove|remove_all|rename)$"));
  m.onMatch(callExpr(callee(fileSystem.bind("callee")), inFn).bind("effect"), [note](const BoundNodes &nodes) {
    note(*nodes.getNodeAs<Stmt>("effect"), nodes.getNodeAs<FunctionDecl>("fn"),
         "std::filesystem::" + nodes.getNodeAs<FunctionDecl>("callee")->getNameAsString() +
             " changes the file system on every process",
         kOnMainProcess);
  });
  // Other writers, by name: not the standard library's or torch's (torch::save is save-on-main-process's,
  // a stream's write follows its open), nor a project function that saves with torch::save.
  auto torchSave = callExpr(callee(functionDecl(hasName("::torch::save"))));
  auto writer = functionDecl(matchesName("([Ww]rite|[Ss]ave|[Dd]ump|WRITE|SAVE|DUMP)[^:]*$"),
                             unless(matchesName("^::(std|torch|at|c10|acc)::")),
                             unless(hasAnyName("::fwrite", "::write", "::pwrite", "::fputs", "::fprintf")),
                             unless(hasBody(hasDescendant(torchSave))));
  m.onMatch(callExpr(callee(writer.bind("callee")), inFn).bind("effect"), [note](const BoundNodes &nodes) {
    note(*nodes.getNodeAs<Stmt>("effect"), nodes.getNodeAs<FunctionDecl>("fn"),
         nodes.getNodeAs<FunctionDecl>("callee")->getQualifiedNameAsString() +
             " writes on every process (all of them write the same output)",
         kOnMainProcess);
  });

  // Progress: `seen` stepped in a loop over a DataLoader, compared with the dataset's size.
  auto counter = varDecl(hasLocalStorage()).bind("counter");
  auto counterRef = declRefExpr(to(equalsBoundNode("counter")));
  auto stepped = stmt(anyOf(unaryOperator(hasAnyOperatorName("++", "--"), hasUnaryOperand(counterRef)),
                            binaryOperator(hasAnyOperatorName("+=", "-="), hasLHS(counterRef))));
  auto loaderLoop = cxxForRangeStmt(hasRangeInit(expr(hasType(isDataLoaderType()))), hasBody(hasDescendant(stepped)));
  auto countRef = expr(ignoringParenImpCasts(anyOf(declRefExpr(to(counter)), hasDescendant(declRefExpr(to(counter))))));
  m.onMatch(
      binaryOperator(hasAnyOperatorName("<", "<=", ">", ">=", "==", "!="),
                     hasEitherOperand(ignoringParenImpCasts(datasetSize())), hasEitherOperand(countRef),
                     hasAncestor(loaderLoop), inFn)
          .bind("effect"),
      [&m, note](const BoundNodes &nodes) {
        const auto *counterVar = nodes.getNodeAs<VarDecl>("counter");
        const auto *cmp = nodes.getNodeAs<BinaryOperator>("effect");
        note(*cmp, nodes.getNodeAs<FunctionDecl>("fn"),
             "every process compares its own count of batches, `" + counterVar->getNameAsString() +
                 "`, with the size of the whole dataset: with a prepared loader it sees only its shard, so it never "
                 "reaches `" +
                 m.text(cmp->getSourceRange()) + "`'s total",
             "compare with this process's share (the dataset's size divided by `accelerator.num_processes()`), and "
             "report progress on the main process only (`if (accelerator.is_main_process())`)");
      });

  m.atEnd([&m, found] {
    std::set<SourceLocation> reported;  // a template's pattern and its instantiations
    for (const SideEffect &effect : *found)
      if (m.usesAccelerator(effect.fn) && reported.insert(effect.at).second)
        m.report(effect.at, effect.reason, effect.suggestion);
  });
}

}  // namespace accmigrate
