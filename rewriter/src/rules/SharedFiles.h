// What the rules about files that every process writes share: save-on-main-process (torch::save),
// write-on-main-process (std::ofstream, create_directories) and every-rank-side-effect (the rest,
// reported). On N processes every rank runs the same code, so each write of a shared file happens N
// times at once; these rules make the main process the one writer, and put a barrier where another
// process reads or uses what it wrote.
#pragma once
#include "analysis/RankDependence.h"

#include <clang/AST/Expr.h>
#include <clang/AST/ExprCXX.h>
#include <clang/AST/Stmt.h>
#include <llvm/ADT/StringRef.h>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace accmigrate {

class Migration;

// What a write of a shared file is guarded with.
inline constexpr const char *kMainProcessGuard = "if (accelerator.is_main_process()) ";

// Some enclosing `if` already picks a process: its condition asks is_main_process(),
// is_local_main_process() or process_index() (a migrated file, or code written for several ranks).
bool underProcessCheck(const clang::Stmt &s, Migration &m);

// The rank dependence that decides whether every process reaches a write (and so may get a barrier):
// the one place where it is set up for these rules, in an end step (facts are read there), told what
// gather-for-metrics and reduce-metrics made uniform (a validation loss reduced after its loop).
RankDependence sharedFileRanks(Migration &m);

// Where the expression `e` stands as a statement `e;`: directly in a block, as the unbraced body of
// an if/else/loop, or neither (its value is used).
enum class StatementPlace { Block, Body, None };
StatementPlace statementPlace(const clang::Stmt &e, clang::ASTContext &ctx);

// Rewrites the statement `e;` (statementPlace Block or Body) into `before... prefix e; after...`:
// in a block, each statement on its own line at `e`'s indentation; as an unbraced body, in braces on
// its line (so that what is added stays under the if/loop). False when it cannot (None, a macro).
bool surroundStatement(Migration &m, const clang::Stmt &e, const std::vector<std::string> &before,
                       llvm::StringRef prefix, const std::vector<std::string> &after);

// The statement is in a template's body as written (its types dependent, its rank dependence
// unknown): the instantiations decide, the pattern only when there are none.
bool inTemplatePattern(const clang::Stmt &s, clang::ASTContext &ctx);

// `std::ofstream log` of `std::ofstream log("x", mode);`: the variable's type as written and its name.
std::string declaredText(const clang::VarDecl &var, Migration &m);

// `"x", mode` of `std::ofstream log("x", mode)`: the text between the construction's parentheses
// (or braces); "" without them.
std::string argumentsText(const clang::CXXConstructExpr &construct, Migration &m);

// The line of `loc` (for findings that name a place: "after line 42").
unsigned lineOf(clang::SourceLocation loc, Migration &m);

// The reads of files in the unit (torch::load, std::ifstream/std::fstream opened by name) and the
// calls between the project's functions: whether a path written somewhere is read later by the
// program. Later: after the write in the same function, or in a loop around both (the next
// iteration), or in a project function called later (the calls followed through this unit).
class FileReads {
 public:
  // Adds its matchers to the unit's traversal (a rule's registerMatchers calls it).
  static std::shared_ptr<FileReads> collect(Migration &m);

  struct Read {
    const clang::Expr *call = nullptr;  // torch::load(...), the stream's construction or open()
    bool sameFunction = false;          // in the writer's function (not in one it calls)
  };
  // The first later read of the path `path` (an argument of the write `write`): the same string
  // literal, the same variable, or the same expression text. {} when none.
  Read readAfter(const clang::Stmt &write, const clang::Expr &path, Migration &m) const;

  // The read as the user wrote it: `torch::load(model, "best.pt")`, `std::ifstream in("log.txt")`.
  static std::string describe(const clang::Expr &read, Migration &m);

  // What identifies a path: `"best.pt"`, a variable (by its declaration), or the expression's text.
  static std::string pathKey(const clang::Expr &path, Migration &m);

 private:
  struct Call {
    clang::SourceLocation at;
    const clang::FunctionDecl *callee;
  };
  struct PathRead {
    const clang::Expr *call;
    std::string key;
  };
  // By function: as written (a template, not its instantiations), its canonical declaration.
  std::map<const clang::FunctionDecl *, std::vector<PathRead>> reads_;
  std::map<const clang::FunctionDecl *, std::vector<Call>> calls_;
};

}  // namespace accmigrate
