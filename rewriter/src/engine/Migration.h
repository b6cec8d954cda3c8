// The state of migrating one translation unit: the AST, which code belongs to the project, the
// edits and findings the rules produce, and the facts (Facts.h) they declare and share.
#pragma once
#include "engine/Facts.h"
#include "engine/Result.h"
#include "engine/Rule.h"

#include <clang/AST/ASTContext.h>
#include <clang/ASTMatchers/ASTMatchFinder.h>
#include <llvm/ADT/Twine.h>
#include <functional>
#include <map>
#include <memory>
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

class RankDependence;

// `name`, a file clang opened, as an absolute path without dots. Relative names (`-Iinclude`) are
// relative to the compile command's directory, which the parse's own file system holds (Driver.cpp),
// not to the process's.
std::string absoluteInUnit(const clang::SourceManager &sm, llvm::StringRef name);

class Migration {
 public:
  Migration(clang::ASTContext &ctx, const ProjectScope &scope, UnitResult &out, RuleSettings settings = {});
  ~Migration();

  clang::ASTContext &ctx;
  const clang::SourceManager &sm;
  const clang::LangOptions &lang;
  const RuleSettings settings;  // what the command line tells the rules (--fsdp-units)

  bool inProject(clang::SourceLocation loc) const { return project_.contains(loc); }

  // What a rule's registerMatchers does (Rule.h), once per unit:
  // - onMatch: `matcher` joins the unit's one MatchFinder, and `onMatch` runs, as this rule, for
  //   every match of the one traversal of the project's declarations (never torch's headers;
  //   template instantiations included: their types are concrete). The matcher says what the rule
  //   looks for, types included (Matchers.h), so that the callback gets only that.
  // - atEnd: `step` runs, as this rule, after the traversal: the rules' end steps in rule order, then
  //   the finalizers'. Decisions that need every match, or a fact, are made there.
  using OnMatch = std::function<void(const clang::ast_matchers::BoundNodes &)>;
  void onMatch(const clang::ast_matchers::StatementMatcher &matcher, OnMatch onMatch);
  void onMatch(const clang::ast_matchers::DeclarationMatcher &matcher, OnMatch onMatch);
  void atEnd(std::function<void()> step);

  // Registers `steps` (rules, then finalizers), runs the traversal, then the end steps.
  void run(const std::vector<const Rule *> &steps);

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

  // Build files (CMakeLists.txt) are outside the parsed unit and usually outside the scope: cmake-link
  // edits and reports them by path and offset, as the running rule.
  void editFile(Edit edit);
  void reportInFile(Finding finding);

  std::string text(clang::SourceRange tokenRange) const;

  // Edits and findings made inside `make` apply only if one of `decisions` holds after the placement
  // of the accelerator across units (AcceleratorPlacement.h). A file whose acc API comes only from
  // such edits is given to the consumers of files-using-acc (include-acc, cmake-link) one at a time,
  // their edits and findings under the same decisions.
  void onlyIf(std::vector<std::string> decisions, const std::function<void()> &make);
  // What create-accelerator records of this unit for that placement.
  AcceleratorSummary &acceleratorSummary() { return out_.accelerator; }
  // fsdp-units: the --fsdp-units names this unit defines a forward of (UnitResult::fsdpUnitsFound).
  std::set<std::string> &fsdpUnitsFound() { return out_.fsdpUnitsFound; }

  // The function whose body holds `node` (lambdas excluded: they see the enclosing function's
  // variables), as written: instantiations map to their template.
  const clang::FunctionDecl *enclosingFunction(const clang::Stmt &node);
  static const clang::FunctionDecl *asWrittenFunction(const clang::FunctionDecl *fn);

  // Facts (Facts.h). Each accessor checks that the running rule declares the fact: writers in
  // Rule::produces, readers in Rule::consumes; a rule that does not stops the tool with an error
  // naming both (a bug in the rule's entry, caught by any test that runs it).
  //
  // accelerator-users: rules that write `accelerator.` into `fn` call useAccelerator(fn), so that
  // create-accelerator declares one there (or passes it in).
  void useAccelerator(const clang::FunctionDecl *fn);
  const std::vector<const clang::FunctionDecl *> &acceleratorUsers();
  bool usesAccelerator(const clang::FunctionDecl *fn);
  // accelerator-options: AcceleratorOptions setters (`step_scheduler_with_optimizer(false)`) that
  // the accelerators this unit declares are created with.
  void addAcceleratorOption(llvm::StringRef setter);
  const std::set<std::string> &acceleratorOptions();
  // prepared-models: models an inserted accelerator.prepare takes over (their `.to(device)` can go).
  void notePrepared(const clang::VarDecl *model);
  bool isPrepared(const clang::VarDecl *model);
  // files-using-acc: written by replace()/insert() when the new text spells the acc API.
  const std::set<clang::FileID> &filesUsingAcc();
  // rewritten-prints: statements (by where they begin) rewritten to print on the main process.
  void noteRewrittenPrint(clang::SourceLocation statement);
  bool isRewrittenPrint(clang::SourceLocation statement);
  // gathered-counts: local counts whose `.eq(...)` operands are now gathered (gather_for_metrics).
  // `increment`: where a gathered `count += ...` ends (the count is uniform after its last one).
  void noteGatheredCount(const clang::VarDecl *count, clang::SourceLocation increment);
  bool isGatheredCount(const clang::VarDecl *count);
  // The values other rules made the same on every process, told to `ranks`: gathered counts (from their
  // declaration on) and reduced values (after their reduction), as far as the running rule consumes
  // those facts.
  void assumeUniformValues(RankDependence &ranks);
  // The unit's rank dependence, told what the other files of the run showed (RuleSettings) and
  // noting in the unit's result the functions of other files whose results it could not see.
  RankDependence rankDependence();
  // reduced-values: variables an inserted `v = accelerator.reduce(v, ...);` makes uniform after a point.
  void noteReduced(const clang::VarDecl *var, clang::SourceLocation point);
  const std::vector<std::pair<const clang::VarDecl *, clang::SourceLocation>> &reducedValues();
  // handled-writes: file writes (by where they begin) that write-on-main-process rewrote or reported.
  void noteHandledWrite(clang::SourceLocation write);
  bool isHandledWrite(clang::SourceLocation write);

 private:
  // UnitResult::uniformResults: what the other files may assume of this unit's functions.
  void exportUniformResults();
  class Callback;
  void access(Fact fact, bool write);  // the check above
  void noteUsesAcc(clang::SourceLocation loc);

  ProjectFiles project_;
  UnitResult &out_;
  std::vector<clang::Decl *> projectDecls_;  // top-level declarations in the project's files
  const Rule *rule_ = nullptr;
  Facts facts_;
  std::vector<std::unique_ptr<Callback>> callbacks_;
  clang::ast_matchers::MatchFinder finder_;
  std::vector<std::pair<const Rule *, std::function<void()>>> endSteps_;
  bool traversing_ = false;  // facts are read only in end steps
  std::vector<std::string> onlyIf_;  // of the edits being made (onlyIf)
  // Files whose acc API comes only from edits under decisions, with those decisions.
  std::map<clang::FileID, std::set<std::string>> filesUsingAccIf_;
};

// Applies `rules` (in order), then every finalizer, to the parsed translation unit in `ctx`: their
// edits and findings go to `out`.
void runRules(clang::ASTContext &ctx, const ProjectScope &scope, const std::vector<const Rule *> &rules,
              UnitResult &out, const RuleSettings &settings = {});

}  // namespace accmigrate
