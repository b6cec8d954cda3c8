// Printing in the training loop: on N processes every line comes out N times. Two rules:
// - print-in-loop (default): reports `std::cout << ...;` and printf statements inside loops of
//   functions that use the accelerator, with the `accelerator.print(...)` line to use;
// - print-on-main-process (off by default, --rules=+print-on-main-process): rewrites
//   `std::cout << a << b << std::endl;` into `accelerator.print(a, b);` (printed by the local main
//   process) and guards printf with `if (accelerator.is_local_main_process())`.
// Off by default because which lines every rank should print (per-rank losses, debugging) is the
// author's call; the report shows every place.
// Both consume the fact accelerator-users (a training loop is a loop of a function that now uses the
// accelerator); print-on-main-process produces rewritten-prints, which print-in-loop consumes so as
// not to report what was rewritten.
#include "Analysis.h"
#include "Matchers.h"
#include "Migration.h"

#include <clang/AST/ExprCXX.h>
#include <clang/ASTMatchers/ASTMatchers.h>
#include <memory>
#include <set>
#include <vector>

using namespace clang;
using namespace clang::ast_matchers;
using namespace accmigrate::matchers;

namespace accmigrate {
namespace {

auto inLoop() { return hasAncestor(stmt(anyOf(forStmt(), cxxForRangeStmt(), whileStmt(), doStmt()))); }

bool isNewline(const Expr *e) {
  e = e->IgnoreParenImpCasts();
  if (const auto *ref = dyn_cast<DeclRefExpr>(e)) return ref->getDecl()->getQualifiedNameAsString() == "std::endl";
  if (const auto *str = dyn_cast<StringLiteral>(e)) return str->getBytes() == "\n";
  if (const auto *ch = dyn_cast<CharacterLiteral>(e)) return ch->getValue() == '\n';
  return false;
}

// `std::cout << a << b << std::endl` as its operands {a, b}; false when it cannot become
// accelerator.print (no final newline, which print adds; std::endl or flush in the middle).
bool printArguments(const CXXOperatorCallExpr *chain, Migration &m, std::vector<std::string> &args) {
  std::vector<const Expr *> operands;
  const Expr *e = chain;
  while (const auto *op = dyn_cast<CXXOperatorCallExpr>(e->IgnoreParenImpCasts())) {
    if (op->getOperator() != OO_LessLess || op->getNumArgs() != 2) return false;
    operands.insert(operands.begin(), op->getArg(1));
    e = op->getArg(0);
  }
  if (operands.empty() || !isNewline(operands.back())) return false;
  operands.pop_back();
  for (const Expr *operand : operands) {
    if (isNewline(operand)) return false;
    std::string text = m.text(operand->getSourceRange());
    if (text.empty()) return false;
    args.push_back(text);
  }
  return true;
}

// A statement to look at: whole, in a function that uses the accelerator (a training loop), not
// already rewritten (by print-on-main-process; `rewritten`: by this rule, as in another instantiation).
bool toConsider(const Stmt &statement, const FunctionDecl *fn, Migration &m, bool rewrite,
                const std::set<SourceLocation> &rewritten) {
  if (!m.usesAccelerator(fn) || !isExpressionStatement(statement, m.ctx)) return false;
  SourceLocation begin = statement.getBeginLoc();
  return rewrite ? !rewritten.count(begin) : !m.isRewrittenPrint(begin);
}

void registerPrint(Migration &m, bool rewrite) {
  // What is printed in loops, in the order found; which of them are in training loops (functions that
  // use the accelerator: the fact accelerator-users) is known after the traversal.
  struct State {
    std::vector<std::pair<const CXXOperatorCallExpr *, const FunctionDecl *>> couts;
    std::vector<std::pair<const CallExpr *, const FunctionDecl *>> printfs;
    std::set<SourceLocation> rewritten;
  };
  auto state = std::make_shared<State>();
  auto cout = declRefExpr(to(varDecl(hasName("::std::cout"))));
  auto chain = cxxOperatorCallExpr(hasOverloadedOperatorName("<<"), hasArgument(0, ignoringImplicit(cout)));
  // The whole statement: the outermost `<<` of a chain that starts at std::cout.
  m.onMatch(cxxOperatorCallExpr(hasOverloadedOperatorName("<<"), anyOf(chain, hasDescendant(chain)), inLoop(),
                                inFunction(functionDecl().bind("fn")))
                .bind("print"),
            [state](const BoundNodes &nodes) {
    state->couts.emplace_back(nodes.getNodeAs<CXXOperatorCallExpr>("print"), nodes.getNodeAs<FunctionDecl>("fn"));
  });
  m.onMatch(callExpr(callee(functionDecl(hasAnyName("::printf", "::std::printf", "::puts", "::std::puts"))), inLoop(),
                     inFunction(functionDecl().bind("fn")))
                .bind("printf"),
            [state](const BoundNodes &nodes) {
    state->printfs.emplace_back(nodes.getNodeAs<CallExpr>("printf"), nodes.getNodeAs<FunctionDecl>("fn"));
  });

  m.atEnd([&m, state, rewrite] {
    auto noteRewritten = [&](SourceLocation begin) {
      state->rewritten.insert(begin);
      m.noteRewrittenPrint(begin);
    };
    for (auto [print, fn] : state->couts) {
      if (!toConsider(*print, fn, m, rewrite, state->rewritten)) continue;
      const Expr *leftmost = print;
      while (const auto *op = dyn_cast<CXXOperatorCallExpr>(leftmost->IgnoreParenImpCasts())) leftmost = op->getArg(0);
      const auto *stream = dyn_cast<DeclRefExpr>(leftmost->IgnoreParenImpCasts());
      if (!stream || stream->getDecl()->getQualifiedNameAsString() != "std::cout") continue;
      std::vector<std::string> args;
      bool convertible = printArguments(print, m, args);
      std::string line = "accelerator.print(";
      for (size_t i = 0; i < args.size(); ++i) line += (i ? ", " : "") + args[i];
      line += ")";
      if (rewrite && convertible) {
        if (m.replace(print->getSourceRange(), line)) noteRewritten(print->getBeginLoc());
        continue;
      }
      if (rewrite) continue;  // what cannot be rewritten is reported by print-in-loop
      m.report(print->getBeginLoc(), "std::cout in the training loop prints on every process",
               convertible ? "print once, on the main process: `" + line + ";` (or --rules=+print-on-main-process)"
                           : std::string("guard it: `if (accelerator.is_local_main_process())`"));
    }
    for (auto [call, fn] : state->printfs) {
      if (!toConsider(*call, fn, m, rewrite, state->rewritten)) continue;
      if (rewrite) {
        if (m.insert(call->getBeginLoc(), "if (accelerator.is_local_main_process()) ")) noteRewritten(call->getBeginLoc());
        continue;
      }
      m.report(call->getBeginLoc(), "printf in the training loop prints on every process",
               "print on the main process only: `if (accelerator.is_local_main_process()) " +
                   m.text(call->getSourceRange()) + ";` (or --rules=+print-on-main-process)");
    }
  });
}

}  // namespace

void registerPrintOnMainProcess(Migration &m) { registerPrint(m, /*rewrite=*/true); }
void registerPrintInLoop(Migration &m) { registerPrint(m, /*rewrite=*/false); }

}  // namespace accmigrate
