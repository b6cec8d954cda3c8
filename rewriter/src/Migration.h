// The state of migrating one translation unit: the AST, which code belongs to the project, the
// edits and findings the rules produce, and what the rules learned that later rules need (which
// functions use the accelerator, which models get prepared).
#pragma once
#include "Result.h"

#include <clang/AST/ASTContext.h>
#include <clang/ASTMatchers/ASTMatchFinder.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/Twine.h>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace accmigrate {

// Which files the tool may edit: those under the directories (or equal to the files) given on the
// command line, outside system headers. Everything else (torch, the standard library) is read-only.
class ProjectScope {
 public:
  explicit ProjectScope(std::vector<std::string> roots) : roots_(std::move(roots)) {}
  bool contains(llvm::StringRef absolutePath) const;

 private:
  std::vector<std::string> roots_;  // absolute, normalised
};

// Which locations of one translation unit are the project's (ProjectScope plus this unit's files),
// the answer kept per file: rules and the parser ask it for every declaration.
class ProjectFiles {
 public:
  ProjectFiles(const clang::SourceManager &sm, const ProjectScope &scope) : sm_(sm), scope_(scope) {}
  // Where `loc` is spelled (in a macro: its definition) is a project file outside system headers.
  bool contains(clang::SourceLocation loc) const;

 private:
  const clang::SourceManager &sm_;
  const ProjectScope &scope_;
  mutable std::map<clang::FileID, bool> cache_;
};

class Migration {
 public:
  Migration(clang::ASTContext &ctx, const ProjectScope &scope, UnitResult &out);

  clang::ASTContext &ctx;
  const clang::SourceManager &sm;
  const clang::LangOptions &lang;

  // The rule whose edits and findings are being recorded (set by the registry while it runs one).
  std::string currentRule;

  bool inProject(clang::SourceLocation loc) const { return project_.contains(loc); }

  // Runs `matcher` over the project's declarations only (never over torch's headers) and calls
  // `onMatch` for every match. Template instantiations are visited: their types are concrete.
  void forEachMatch(const clang::ast_matchers::internal::Matcher<clang::Stmt> &matcher,
                    llvm::function_ref<void(const clang::ast_matchers::BoundNodes &)> onMatch);
  void forEachMatch(const clang::ast_matchers::internal::Matcher<clang::Decl> &matcher,
                    llvm::function_ref<void(const clang::ast_matchers::BoundNodes &)> onMatch);

  // Edits. Each returns false (and reports why) when the range is inside a macro expansion or outside
  // the project; `what` is the change shown to the user in that report.
  bool replace(clang::CharSourceRange range, llvm::StringRef text);
  bool replace(clang::SourceRange tokenRange, llvm::StringRef text) {
    return replace(clang::CharSourceRange::getTokenRange(tokenRange), text);
  }
  bool insert(clang::SourceLocation at, llvm::StringRef text);
  bool remove(clang::CharSourceRange range) { return replace(range, ""); }

  // Something left for the user: `reason; suggestion` at `loc` (macro locations map to the file).
  void report(clang::SourceLocation loc, const llvm::Twine &reason, const llvm::Twine &suggestion,
              Finding::Level level = Finding::Level::Warning);

  std::string text(clang::SourceRange tokenRange) const;

  // The function whose body holds `node` (lambdas excluded: they see the enclosing function's
  // variables), as written: instantiations map to their template.
  const clang::FunctionDecl *enclosingFunction(const clang::Stmt &node);
  static const clang::FunctionDecl *asWrittenFunction(const clang::FunctionDecl *fn);

  // Rules that write `accelerator.` call this so that one is created in (or passed to) `fn`.
  void useAccelerator(const clang::FunctionDecl *fn);
  const std::vector<const clang::FunctionDecl *> &acceleratorUsers() const { return users_; }

  // AcceleratorOptions setters (`step_scheduler_with_optimizer(false)`) that the accelerators this
  // unit declares are created with.
  std::set<std::string> acceleratorOptions;

  // Models whose placement accelerator.prepare takes over (their `.to(device)` can go).
  std::set<const clang::VarDecl *> preparedModels;

  // Files that got an edit using the acc API (they need #include <acc/acc.h>).
  const std::set<clang::FileID> &filesUsingAcc() const { return filesUsingAcc_; }
  void noteUsesAcc(clang::SourceLocation loc);

  bool edited(clang::SourceLocation loc) const;  // some edit touches `loc` already

 private:
  ProjectFiles project_;
  UnitResult &out_;
  std::vector<clang::Decl *> projectDecls_;  // top-level declarations in the project's files
  std::vector<const clang::FunctionDecl *> users_;
  std::set<clang::FileID> filesUsingAcc_;
};

}  // namespace accmigrate
