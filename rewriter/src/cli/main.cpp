// acc-migrate: rewrites single-device libtorch training code for acc and shows the change as a diff.
// This file wires the stages together: options -> sources -> parse and apply rules -> merge edits ->
// diff / write / report -> exit code.
#include "cli/Options.h"
#include "engine/AcceleratorPlacement.h"
#include "engine/Driver.h"
#include "engine/Rule.h"
#include "output/Output.h"
#include "output/ParseFailures.h"
#include "output/Report.h"
#include "output/UnifiedDiff.h"
#include "project/AccPackage.h"
#include "project/CompileFlags.h"
#include "project/PchCache.h"
#include "project/ShellQuote.h"

#include <acc_common/path_kind.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Process.h>
#include <llvm/Support/raw_ostream.h>
#include <algorithm>
#include <thread>

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
using namespace accmigrate;

namespace {

std::string absolute(llvm::StringRef p) {
  llvm::SmallString<256> result(p);
  fs::make_absolute(result);
  path::remove_dots(result, /*remove_dot_dot=*/true);
  return std::string(result);
}

bool isSource(llvm::StringRef file) {
  llvm::StringRef ext = path::extension(file);
  return ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".c++";
}

// Sources to parse: files as given, and the C++ sources under directories (build trees and hidden
// directories skipped), sorted so that output is stable.
std::vector<std::string> collectSources(const std::vector<std::string> &inputs) {
  std::vector<std::string> sources;
  for (const std::string &input : inputs) {
    if (!fs::is_directory(input)) {
      sources.push_back(absolute(input));
      continue;
    }
    std::error_code ec;
    for (fs::recursive_directory_iterator it(input, ec), end; it != end && !ec; it.increment(ec)) {
      llvm::StringRef name = path::filename(it->path());
      if (it->type() == fs::file_type::directory_file) {
        if (name.startswith(".") || name == "build" || name.startswith("build-")) it.no_push();
      } else if (isSource(name) && acc::common::inspect_path(it->path()).regular()) {
        // Only regular files (or links to them): a FIFO or device named *.cpp would block clang's read.
        sources.push_back(absolute(it->path()));
      }
    }
  }
  std::sort(sources.begin(), sources.end());
  sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
  return sources;
}

// What the tool may edit: the input directories, and the directory of each input file (its headers).
std::vector<std::string> scopeRoots(const std::vector<std::string> &inputs) {
  std::vector<std::string> roots;
  for (const std::string &input : inputs) {
    std::string abs = absolute(input);
    roots.push_back(fs::is_directory(abs) ? abs : path::parent_path(abs).str());
  }
  return roots;
}

// The directory the inputs share: --output-dir mirrors the tree below it.
std::string commonBase(const std::vector<std::string> &roots) {
  std::string base = roots.front();
  for (const std::string &root : roots)
    while (!llvm::StringRef(root).startswith(base) ||
           (root.size() > base.size() && !path::is_separator(root[base.size()])))
      base = path::parent_path(base).str();
  return base;
}

std::string displayPath(const std::string &file) {
  llvm::SmallString<256> cwd;
  fs::current_path(cwd);
  llvm::SmallString<256> shown(file);
  if (path::replace_path_prefix(shown, cwd, "")) {
    std::string relative = path::relative_path(shown).str();
    return relative.empty() ? "." : relative;
  }
  return file;
}

// The diff's a/ b/ label: relative to the current directory, or the absolute path without its root.
std::string diffLabel(const std::string &file) {
  std::string shown = displayPath(file);
  return path::is_absolute(shown) ? path::relative_path(shown).str() : shown;
}

void sortFindings(std::vector<Finding> &findings) {
  auto key = [](const Finding &f) { return std::tie(f.file, f.line, f.column, f.rule, f.reason); };
  std::sort(findings.begin(), findings.end(), [&](const Finding &a, const Finding &b) { return key(a) < key(b); });
  findings.erase(std::unique(findings.begin(), findings.end(),
                             [&](const Finding &a, const Finding &b) { return key(a) == key(b); }),
                 findings.end());
}

// A --fsdp-units type is found when any unit of the run defines its forward (with a body): a unit
// type is usually defined once, in one source or in a header several include. The others are named
// once, at the end; the exit status stays what the files decide.
void warnFsdpUnitsNotFound(const std::vector<std::string> &types, const std::vector<UnitResult> &units, size_t failed) {
  for (const std::string &type : types) {
    if (std::any_of(units.begin(), units.end(),
                    [&](const UnitResult &unit) { return unit.fsdpUnitsFound.count(type) > 0; }))
      continue;
    llvm::errs() << "acc-migrate: warning: --fsdp-units: no migrated file defines a forward of '" << type
                 << "' (looked for classes " << type << " and " << type
                 << "Impl deriving from torch::nn::Module, with a forward body, in the sources and the project "
                    "headers they include"
                 << (failed ? "; " + std::to_string(failed) + " source(s) did not parse" : std::string())
                 << "); its forward gets no acc::ForwardHooksGuard\n";
  }
}

// A --rules selection that leaves out default rules and did nothing in a file where the defaults
// would have acted (runRules counted it): named, so that an empty diff is not taken for "nothing to do".
void warnSelectionLeftOut(const std::string &spec, const std::vector<UnitResult> &units) {
  for (const UnitResult &unit : units) {
    if (!unit.parsed || unit.leftOut.edits + unit.leftOut.findings == 0) continue;
    std::string rules;
    for (const std::string &rule : unit.leftOut.rules) rules += (rules.empty() ? "" : ", ") + rule;
    llvm::errs() << "acc-migrate: warning: " << displayPath(unit.mainFile) << ": --rules=" << spec
                 << " changed nothing here, where the default rules make " << unit.leftOut.edits << " edit(s) and "
                 << unit.leftOut.findings << " finding(s) (" << rules
                 << "); `+name` adds a rule to the defaults, `-name` removes one (--rules=-device-move)\n";
  }
}

// cmake-link made these projects find acc (the directories of the CMakeLists.txt it gave
// find_package(acc)): the line that configures each with this acc, whose package config the
// project's CMake would not otherwise find (or would find another acc's), and the libtorch it was
// built against.
void printAccConfigureLines(const std::vector<FileChange> &changes, const Options &options, const std::string &base,
                            const CompileFlags &flags, const char *argv0) {
  std::vector<std::string> tops;
  for (const FileChange &change : changes)
    if (path::filename(change.path) == "CMakeLists.txt" &&
        std::any_of(change.edits.begin(), change.edits.end(),
                    [](const Edit &e) { return llvm::StringRef(e.text).contains("find_package(acc"); }))
      tops.push_back(path::parent_path(change.path).str());
  if (tops.empty()) return;
  AccPackage acc = findAccPackage(argv0);
  bool dryRun = !options.inPlace && options.outputDir.empty();
  for (const std::string &top : tops) {
    std::string where = top;
    if (!options.outputDir.empty()) {
      llvm::SmallString<256> mirrored(top);
      path::replace_path_prefix(mirrored, base, "");
      llvm::SmallString<256> copy(absolute(options.outputDir));
      if (!path::relative_path(mirrored).empty()) path::append(copy, path::relative_path(mirrored));
      where = std::string(copy);
    }
    // The user's own build directory, configured again, keeps the options it was made with.
    bool ownBuild = options.outputDir.empty() && !flags.userBuildDir.empty() && flags.projectTop == top;
    std::string build = ownBuild ? flags.userBuildDir : where + "/build";
    std::string configure = "cmake -S " + shellQuote(displayPath(where)) + " -B " + shellQuote(displayPath(build)) +
                            " -Dacc_DIR=" + (acc.dir.empty() ? acc.installedDir : shellQuote(acc.dir));
    // A fresh build directory also needs the libtorch acc was built against: cmake-link puts
    // find_package(acc) after the project's own find_package(Torch), which would find none (or
    // another, which accConfig.cmake refuses). The user's own build keeps the libtorch it found.
    if (!ownBuild && !acc.torchDir.empty()) configure += " -DTorch_DIR=" + shellQuote(acc.torchDir);
    llvm::errs() << "acc-migrate: the migrated project " << displayPath(where) << " calls find_package(acc)";
    if (acc.dir.empty())
      llvm::errs() << ", but " << acc.missing << "; then configure it (with the options you build it with):\n";
    else
      llvm::errs() << (dryRun ? "; once written (--in-place or --output-dir), configure" : "; configure")
                   << " it with this acc (and the options you build it with):\n";
    llvm::errs() << "    " << configure << "\n";
  }
}

int listRules() {
  size_t width = 0;
  for (const std::vector<Rule> *list : {&allRules(), &allFinalizers()})
    for (const Rule &rule : *list) width = std::max(width, strlen(rule.name));
  for (const Rule &rule : allRules())
    llvm::outs() << llvm::left_justify(rule.name, width) << "  " << (rule.enabledByDefault ? "   " : "off")
                 << "  " << rule.summary << "\n";
  llvm::outs() << "finalizers (always run, after the rules, on the facts they produce):\n";
  for (const Rule &finalizer : allFinalizers())
    llvm::outs() << llvm::left_justify(finalizer.name, width) << "       " << finalizer.summary << "\n";
  return ExitOk;
}

}  // namespace

int main(int argc, const char **argv) {
  Options options;
  if (std::optional<int> stop = parseOptions(argc, argv, options)) return *stop;
  if (options.listRules) return listRules();

  DriverConfig config;
  std::string error;
  config.settings.fsdpUnits = options.fsdpUnits;
  if (!selectRules(options.rules, config.rules, error) ||
      !applySettings(options.rules, config.settings, config.rules, error)) {
    llvm::errs() << "acc-migrate: error: " << error << "\n";
    return ExitUsage;
  }
  for (const std::string &warning : selectionWarnings(config.rules))
    llvm::errs() << "acc-migrate: warning: --rules=" << options.rules << ": " << warning << "\n";
  std::vector<std::string> sources = collectSources(options.inputs);
  if (sources.empty()) {
    llvm::errs() << "acc-migrate: error: no C++ sources (.cpp .cc .cxx) under the given paths\n";
    return ExitUsage;
  }
  std::unique_ptr<CompileFlags> flags = makeCompileFlags(options, sources, argv[0], error);
  if (!flags) {
    llvm::errs() << "acc-migrate: error: " << error << "\n";
    return ExitUsage;
  }
  llvm::errs() << "acc-migrate: " << flags->description << "\n";

  std::vector<std::string> roots = scopeRoots(options.inputs);
  ProjectScope scope(roots);
  config.database = flags->database.get();
  config.scope = &scope;
  config.extraArgs = options.extraArgs;
  std::unique_ptr<PchCache> pch;
  if (!options.pchCache.empty())
    pch = std::make_unique<PchCache>(options.pchCache, options.extraArgs, options.pchCacheLimit);
  config.pch = pch.get();
  config.jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  config.progress = llvm::sys::Process::StandardErrIsDisplayed() && sources.size() > 3;

  RunSummary run;
  run.units = runUnits(sources, config);
  run.failures = describeFailures(run.units);
  applyAcceleratorPlacement(run.units);  // one accelerator across all units, before their edits merge
  for (const UnitResult &unit : run.units) run.findings.insert(run.findings.end(), unit.findings.begin(), unit.findings.end());
  run.changes = mergeEdits(run.units, run.findings);
  sortFindings(run.findings);

  bool color = options.color == ColorMode::Always ||
               (options.color == ColorMode::Auto && llvm::sys::Process::StandardOutIsDisplayed());
  if (!options.inPlace && options.outputDir.empty())
    for (const FileChange &change : run.changes)
      llvm::outs() << unifiedDiff(diffLabel(change.path), change.before, change.after, color);
  llvm::outs().flush();

  int status = ExitOk;
  std::vector<RemovedTemporary> removed;
  if (options.inPlace && !writeInPlace(run.changes, options.backupSuffix, removed, error)) {
    llvm::errs() << "acc-migrate: error: " << error << "\n";
    status = ExitSomeFilesFailed;
  }
  // Build files cmake-link edits lie above the inputs (CMakeLists.txt beside src/): the mirrored tree
  // then starts where they do.
  std::vector<std::string> bases = roots;
  for (const FileChange &change : run.changes) bases.push_back(path::parent_path(change.path).str());
  std::string base = commonBase(bases);
  if (!options.outputDir.empty() &&
      !writeOutputDir(run.changes, roots, base, absolute(options.outputDir), removed, error)) {
    llvm::errs() << "acc-migrate: error: " << error << "\n";
    status = ExitSomeFilesFailed;
  }
  // Nothing the user did not write disappears unsaid.
  for (const RemovedTemporary &temporary : removed)
    llvm::errs() << "acc-migrate: note: removed " << displayPath(temporary.path)
                 << ", left by an acc-migrate run killed while writing it (" << temporary.why << ")\n";
  if (!options.reportFile.empty() && !writeJsonReport(run, options.reportFile, error)) {
    llvm::errs() << "acc-migrate: error: " << error << "\n";
    status = ExitSomeFilesFailed;
  }
  std::vector<const Rule *> ran = config.rules;
  for (const Rule &finalizer : allFinalizers()) ran.push_back(&finalizer);
  if (!options.sarifFile.empty() && !writeSarif(run, ran, options.sarifFile, error)) {
    llvm::errs() << "acc-migrate: error: " << error << "\n";
    status = ExitSomeFilesFailed;
  }

  // What needs a person: file:line:col: rule: reason; suggested change.
  for (const Finding &f : run.findings)
    llvm::errs() << displayPath(f.file) << ":" << f.line << ":" << f.column << ": " << f.rule << ": " << f.reason
                 << "; " << f.suggestion << "\n";
  // Each source that did not parse, with clang's first error and, since its edits are missing from
  // the migration, what its text shows of training code; then how to pass the headers not found.
  for (const ParseFailure &failure : run.failures) {
    llvm::errs() << displayPath(failure.unit->mainFile) << ": not migrated (left unchanged): " << failure.unit->diagnostic;
    if (!failure.trainingCode.empty())
      llvm::errs() << "; its text has training code (" << llvm::join(failure.trainingCode, ", ")
                   << "), whose migration is missing";
    llvm::errs() << "\n";
  }
  llvm::errs() << missingHeaderAdvice(run.failures, *flags, options.inputs, displayPath);
  size_t failed = run.failures.size(), edits = 0;
  warnFsdpUnitsNotFound(options.fsdpUnits, run.units, failed);
  warnSelectionLeftOut(options.rules, run.units);
  for (const FileChange &change : run.changes) edits += change.edits.size();
  llvm::errs() << "acc-migrate: " << run.changes.size() << " file(s) changed (" << edits << " edit(s)), "
               << sources.size() - failed << " of " << sources.size() << " source(s) parsed, "
               << failureSummary(run.failures, displayPath) << "; " << run.findings.size() << " finding(s) to review"
               << (options.inPlace || !options.outputDir.empty() ? "" : "; dry run: nothing written") << "\n";
  printAccConfigureLines(run.changes, options, base, *flags, argv[0]);
  // A file that did not parse may hold training code (or a caller of it) whose migration is missing:
  // the run did not do what was asked, whatever the other files got.
  if (failed) status = ExitSomeFilesFailed;
  return status;
}
