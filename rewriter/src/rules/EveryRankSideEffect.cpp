// every-rank-side-effect (report): what every process does that only one should, other than what
// save-on-main-process and write-on-main-process rewrite (torch::save, and the std::ofstream openings
// and create_directories calls in the fact handled-writes), in functions that use the accelerator
// (the fact accelerator-users):
// - writing files: constructing a std::ofstream with a name or open()ing one, fopen in a write or
//   append mode, std::filesystem::create_*/remove/remove_all/rename, and writers whose name says
//   write/save/dump (cv::imwrite, stbi_write_png, a project's save_image): N processes write the
//   same file at once;
// - progress counters that assume the whole dataset: a count stepped in a loop over a DataLoader
//   compared with the dataset's size (directly or through a variable initialised from it): each
//   process sees only its shard, so it never reaches the total.
// Reported with the lines to write, not rewritten: whether a C FILE* that only the main process
// opens is then used safely, whether another process uses a path that is removed or renamed, which
// process should call a writer of the project's, is the author's call. Statements already under
// `is_main_process()`/`process_index()` are left alone.
#include "analysis/Analysis.h"
#include "analysis/Matchers.h"
#include "engine/Migration.h"
#include "rules/SharedFiles.h"

#include <clang/AST/ExprCXX.h>
#include <clang/AST/ParentMapContext.h>
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

const char *const kOwnFile = ", or give each process its own file (`accelerator.process_index()` in its name)";

// `if (accelerator.is_main_process()) call;` where the call is a statement of its own, else the
// guard around the statement that holds it.
std::string onMainProcess(const Expr &call, Migration &m) {
  std::string text = m.text(call.getSourceRange());
  if (statementPlace(call, m.ctx) != StatementPlace::None) return "`" + std::string(kMainProcessGuard) + text + ";`";
  return "`" + std::string(kMainProcessGuard) + "{ ... }` around the statement that calls `" + text + "`";
}

// The variable `call` initialises (`FILE *f = fopen(...)`), or null.
const VarDecl *initialised(const Expr &call, Migration &m) {
  for (DynTypedNodeList parents = m.ctx.getParents(call); !parents.empty(); parents = m.ctx.getParents(parents[0])) {
    if (const auto *var = parents[0].get<VarDecl>()) return var;
    const Stmt *p = parents[0].get<Stmt>();
    if (!p || !isa<ImplicitCastExpr, ParenExpr, ExprWithCleanups>(p)) return nullptr;
  }
  return nullptr;
}

// fopen's mode writes: "w", "a" or an update mode ("r+").
bool writesMode(const Expr *mode) {
  const auto *literal = dyn_cast<StringLiteral>(mode->IgnoreParenImpCasts());
  return !literal || literal->getString().find_first_of("wa+") != StringRef::npos;
}

}  // namespace

void registerEveryRankSideEffect(Migration &m) {
  auto found = std::make_shared<std::vector<SideEffect>>();
  // The suggestion is made here, while the match's nodes are at hand, but only kept if reported.
  auto note = [&m, found](const Stmt &s, const FunctionDecl *fn, std::string reason, std::string suggestion) {
    if (!underProcessCheck(s, m)) found->push_back({s.getBeginLoc(), fn, std::move(reason), std::move(suggestion)});
  };
  auto inFn = inFunction(functionDecl().bind("fn"));

  auto ofstream = cxxRecordDecl(hasName("::std::basic_ofstream"));
  auto namedFileConstructor = cxxConstructorDecl(
      ofClass(ofstream), unless(anyOf(isDefaultConstructor(), isCopyConstructor(), isMoveConstructor())));
  m.onMatch(cxxConstructExpr(hasDeclaration(namedFileConstructor), inFn).bind("effect"), [&m, note](
                                                                                             const BoundNodes &nodes) {
    const auto *construct = nodes.getNodeAs<CXXConstructExpr>("effect");
    const VarDecl *var = initialised(*construct, m);
    std::string open = "do it on the main process only";
    if (var && var->getInitStyle() != VarDecl::CInit)  // `std::ofstream log(path)`: an unopened stream ignores writes
      open = "open it on the main process only: `" + declaredText(*var, m) + ";` and `" + kMainProcessGuard +
             var->getNameAsString() + ".open(" + argumentsText(*construct, m) +
             ");` (a stream that is not open ignores writes; a test of it then fails on the other processes)";
    note(*construct, nodes.getNodeAs<FunctionDecl>("fn"),
         "std::ofstream writes a file on every process (all of them write the same file)", open + kOwnFile);
  });
  m.onMatch(cxxMemberCallExpr(callee(cxxMethodDecl(hasName("open"), ofClass(ofstream))), inFn).bind("effect"),
            [&m, note](const BoundNodes &nodes) {
              const auto *call = nodes.getNodeAs<CXXMemberCallExpr>("effect");
              note(*call, nodes.getNodeAs<FunctionDecl>("fn"),
                   "std::ofstream::open writes a file on every process (all of them write the same file)",
                   "open it on the main process only: " + onMainProcess(*call, m) +
                       " (a stream that is not open ignores writes; a test of it then fails on the other processes)" +
                       kOwnFile);
            });
  m.onMatch(
      callExpr(callee(functionDecl(hasAnyName("::fopen", "::std::fopen"))), argumentCountIs(2), inFn).bind("effect"),
      [&m, note](const BoundNodes &nodes) {
        const auto *call = nodes.getNodeAs<CallExpr>("effect");
        if (!writesMode(call->getArg(1))) return;
        const VarDecl *var = initialised(*call, m);
        std::string text = m.text(call->getSourceRange());
        std::string open =
            var ? "`" + declaredText(*var, m) + " = accelerator.is_main_process() ? " + text +
                      " : nullptr;`, and each use of it under `if (" + var->getNameAsString() + ")`"
                : "`accelerator.is_main_process() ? " + text + " : nullptr`, and each use of the FILE* under a test";
        note(*call, nodes.getNodeAs<FunctionDecl>("fn"),
             "fopen for writing writes a file on every process (all of them write the same file)",
             "open it on the main process only: " + open + kOwnFile);
      });
  auto fileSystem =
      functionDecl(matchesName("^::std::(__fs::)?filesystem::(.*::)?(create_[a-z_]+|remove|remove_all|rename)$"));
  m.onMatch(callExpr(callee(fileSystem.bind("callee")), inFn).bind("effect"), [&m, note](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("effect");
    note(*call, nodes.getNodeAs<FunctionDecl>("fn"),
         "std::filesystem::" + nodes.getNodeAs<FunctionDecl>("callee")->getNameAsString() +
             " changes the file system on every process",
         "do it on the main process only: " + onMainProcess(*call, m) +
             ", then `accelerator.wait_for_everyone();` where every process gets to, if the others use the path next");
  });
  // Other writers, by name: not the standard library's or torch's (torch::save is save-on-main-process's,
  // a stream's write follows its open), nor a project function that saves with torch::save.
  auto torchSave = callExpr(callee(functionDecl(hasName("::torch::save"))));
  auto writer = functionDecl(matchesName("([Ww]rite|[Ss]ave|[Dd]ump|WRITE|SAVE|DUMP)[^:]*$"),
                             unless(matchesName("^::(std|torch|at|c10|acc)::")),
                             unless(hasAnyName("::fwrite", "::write", "::pwrite", "::fputs", "::fprintf")),
                             unless(hasBody(hasDescendant(torchSave))));
  m.onMatch(callExpr(callee(writer.bind("callee")), inFn).bind("effect"), [&m, note](const BoundNodes &nodes) {
    const auto *call = nodes.getNodeAs<CallExpr>("effect");
    note(*call, nodes.getNodeAs<FunctionDecl>("fn"),
         nodes.getNodeAs<FunctionDecl>("callee")->getQualifiedNameAsString() +
             " writes on every process (all of them write the same output)",
         "do it on the main process only: " + onMainProcess(*call, m) + kOwnFile);
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
      if (m.usesAccelerator(effect.fn) && !m.isHandledWrite(effect.at) && reported.insert(effect.at).second)
        m.report(effect.at, effect.reason, effect.suggestion);
  });
}

}  // namespace accmigrate
