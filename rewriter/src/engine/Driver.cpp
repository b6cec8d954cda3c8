#include "engine/Driver.h"

#include <clang/AST/ASTConsumer.h>
#include <clang/Basic/Diagnostic.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

using namespace clang;
using namespace clang::tooling;

namespace accmigrate {
namespace {

// Keeps clang's first error (file:line:col: message) for the report; everything else is silent,
// since the user's warnings are not our business.
class FirstError : public DiagnosticConsumer {
 public:
  std::string message;
  void HandleDiagnostic(DiagnosticsEngine::Level level, const Diagnostic &info) override {
    DiagnosticConsumer::HandleDiagnostic(level, info);
    if (level < DiagnosticsEngine::Error || !message.empty()) return;
    SmallString<256> text;
    info.FormatDiagnostic(text);
    if (info.hasSourceManager() && info.getLocation().isValid()) {
      PresumedLoc loc = info.getSourceManager().getPresumedLoc(info.getLocation());
      if (loc.isValid())
        message = std::string(loc.getFilename()) + ":" + std::to_string(loc.getLine()) + ":" +
                  std::to_string(loc.getColumn()) + ": error: ";
    }
    if (message.empty()) message = "error: ";
    message += text.str();
  }
};

class RulesConsumer : public ASTConsumer {
 public:
  RulesConsumer(const DriverConfig &config, UnitResult &out, const SourceManager &sm)
      : config_(config), out_(out), sm_(sm), project_(sm, *config.scope) {}
  // Rules look only at the project's code, so the bodies of torch's and the standard library's
  // functions need not be parsed, nor instantiated for the project's types (most of the time of a
  // file). Where they were written decides: a macro of a header expanded in the project is kept.
  bool shouldSkipFunctionBody(Decl *d) override {
    return !project_.contains(sm_.getExpansionLoc(d->getLocation()));
  }
  void HandleTranslationUnit(ASTContext &ctx) override {
    if (ctx.getDiagnostics().hasErrorOccurred()) return;  // a broken AST gives wrong edits
    out_.parsed = true;
    runRules(ctx, *config_.scope, config_.rules, out_, config_.settings);
  }

 private:
  const DriverConfig &config_;
  UnitResult &out_;
  const SourceManager &sm_;
  ProjectFiles project_;
};

class RulesAction : public ASTFrontendAction {
 public:
  RulesAction(const DriverConfig &config, UnitResult &out) : config_(config), out_(out) {}
  bool BeginInvocation(CompilerInstance &ci) override {
    ci.getFrontendOpts().SkipFunctionBodies = true;  // where RulesConsumer says so
    // No "1 error generated." on stderr (clang prints it after an action, unless carets are off):
    // the file is named with its first error in the summary (FirstError).
    ci.getDiagnosticOpts().ShowCarets = false;
    return true;
  }
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance &ci, StringRef) override {
    return std::make_unique<RulesConsumer>(config_, out_, ci.getSourceManager());
  }

 private:
  const DriverConfig &config_;
  UnitResult &out_;
};

class RulesActionFactory : public FrontendActionFactory {
 public:
  RulesActionFactory(const DriverConfig &config, UnitResult &out) : config_(config), out_(out) {}
  std::unique_ptr<FrontendAction> create() override { return std::make_unique<RulesAction>(config_, out_); }

 private:
  const DriverConfig &config_;
  UnitResult &out_;
};

// Parses `file` (with `pch` as its prefix when not empty) and applies the rules. Returns clang's
// first error, "" on success.
std::string parseOne(const std::string &file, const std::string &pch, const DriverConfig &config, UnitResult &out) {
  out = UnitResult();
  out.mainFile = file;
  // A file system of its own: the default one changes the process's working directory to the
  // command's and back, which races between threads (one thread "restores" another's directory).
  ClangTool tool(*config.database, {file}, std::make_shared<PCHContainerOperations>(),
                 llvm::vfs::createPhysicalFileSystem());
  // Clang's own headers (stddef.h...) live in the resource directory of the LLVM we link against.
  tool.appendArgumentsAdjuster(getInsertArgumentAdjuster("-resource-dir=" ACC_CLANG_RESOURCE_DIR,
                                                         ArgumentInsertPosition::END));
  // The user's `-- <args>` come first so that their -I/-isystem win over the inferred ones.
  tool.appendArgumentsAdjuster(getInsertArgumentAdjuster(
      CommandLineArguments(config.extraArgs.begin(), config.extraArgs.end()), ArgumentInsertPosition::BEGIN));
  if (!pch.empty())
    tool.appendArgumentsAdjuster(getInsertArgumentAdjuster({"-include-pch", pch}, ArgumentInsertPosition::BEGIN));
  FirstError diagnostics;
  tool.setDiagnosticConsumer(&diagnostics);
  tool.setPrintErrorMessage(false);
  RulesActionFactory factory(config, out);
  int status = tool.run(&factory);
  if (status == 0 && out.parsed) return "";
  return diagnostics.message.empty() ? "could not run the compiler on it" : diagnostics.message;
}

void runOne(const std::string &file, const DriverConfig &config, UnitResult &out) {
  std::string pch;
  if (config.pch) {
    std::vector<CompileCommand> commands = config.database->getCompileCommands(file);
    if (!commands.empty()) pch = config.pch->pchFor(commands.front());
  }
  std::string error = parseOne(file, pch, config, out);
  // A PCH clang will not load (torch's headers changed since) must not fail the file: drop it, parse
  // without it.
  if (!error.empty() && !pch.empty() &&
      (error.find(pch) != std::string::npos || error.find("precompiled header") != std::string::npos)) {
    config.pch->discard(pch);
    error = parseOne(file, "", config, out);
  }
  if (!error.empty()) {
    out.parsed = false;
    out.edits.clear();
    out.findings.clear();
    out.fsdpUnitsFound.clear();
    out.diagnostic = error;
  }
}


std::vector<UnitResult> runRound(const std::vector<std::string> &files, const DriverConfig &config) {
  std::vector<UnitResult> results(files.size());
  std::atomic<size_t> next{0}, done{0};
  std::mutex progressMutex;
  auto worker = [&] {
    for (size_t i; (i = next++) < files.size();) {
      runOne(files[i], config, results[i]);
      size_t finished = ++done;
      if (config.progress) {
        std::lock_guard<std::mutex> lock(progressMutex);
        unsigned width = 30, filled = unsigned(width * finished / files.size());
        llvm::errs() << "\r[" << std::string(filled, '#') << std::string(width - filled, ' ') << "] " << finished
                     << "/" << files.size() << " files";
        if (finished == files.size()) llvm::errs() << "\n";
      }
    }
  };
  unsigned jobs = std::max(1u, std::min<unsigned>(config.jobs, files.size()));
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < jobs; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread &t : threads) t.join();
  return results;
}

}  // namespace

// A file's functions whose results are the same on every process (an evaluate() that gathers its
// counts) decide what the files calling them may do: those files are parsed again, told, until no
// file shows anything new (a chain of files adds one round per link; four at most).
std::vector<UnitResult> runUnits(const std::vector<std::string> &files, const DriverConfig &config) {
  std::vector<UnitResult> results = runRound(files, config);
  DriverConfig again = config;
  again.progress = false;
  for (int round = 0; round < 4; ++round) {
    std::set<std::string> uniform = config.settings.uniformResultsElsewhere;
    for (const UnitResult &unit : results) uniform.insert(unit.uniformResults.begin(), unit.uniformResults.end());
    std::vector<size_t> told;
    for (size_t i = 0; i < results.size(); ++i)
      for (const std::string &key : results[i].resultsNotSeen)
        if (uniform.count(key) && !again.settings.uniformResultsElsewhere.count(key)) {
          told.push_back(i);
          break;
        }
    if (told.empty()) break;
    again.settings.uniformResultsElsewhere = std::move(uniform);
    std::vector<std::string> subset;
    for (size_t i : told) subset.push_back(files[i]);
    std::vector<UnitResult> redone = runRound(subset, again);
    for (size_t k = 0; k < told.size(); ++k) results[told[k]] = std::move(redone[k]);
  }
  return results;
}

}  // namespace accmigrate
