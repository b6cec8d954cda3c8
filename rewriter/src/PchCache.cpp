#include "PchCache.h"

#include <clang/Basic/Version.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MD5.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Process.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <cstdlib>

using namespace clang;
using namespace clang::tooling;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace accmigrate {
namespace {

// What the cached header holds. Files that include less of torch still gain: the rest is loaded lazily.
const char kPrefix[] = "#include <torch/torch.h>\n";
// How it is built (part of the key, so that a cache from an older build is not reused): function
// bodies skipped.
const char kBuild[] = "skip-function-bodies";

// The compile command without what names this one file (the source, its object, its dependency
// file): files built with the same flags share one PCH.
std::vector<std::string> sharedFlags(const CompileCommand &command) {
  llvm::SmallString<256> source(command.Filename);
  fs::make_absolute(command.Directory, source);
  std::vector<std::string> flags;
  const std::vector<std::string> &args = command.CommandLine;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    if (arg == "-o" || arg == "-MF" || arg == "-MT" || arg == "-MQ") { ++i; continue; }
    if (arg == "-c" || arg == "-MD" || arg == "-MMD") continue;
    if (i > 0 && !arg.startswith("-")) {
      llvm::SmallString<256> abs(arg);
      fs::make_absolute(command.Directory, abs);
      if (abs == source) continue;
    }
    flags.push_back(args[i]);
  }
  return flags;
}

// Builds the PCH with the given flags; the output path is ours, not the command's.
class WritePch : public GeneratePCHAction {
 public:
  explicit WritePch(std::string output) : output_(std::move(output)) {}
  bool BeginInvocation(CompilerInstance &ci) override {
    ci.getFrontendOpts().OutputFile = output_;
    // Instantiate the templates torch's headers use once, in the PCH, instead of in every file.
    ci.getLangOpts().PCHInstantiateTemplates = true;
    // acc-migrate never looks inside torch's functions: without their bodies the PCH is smaller, and
    // each file instantiates torch's templates for its types without parsing their code.
    ci.getFrontendOpts().SkipFunctionBodies = true;
    return true;
  }

 private:
  std::string output_;
};

class WritePchFactory : public FrontendActionFactory {
 public:
  explicit WritePchFactory(std::string output) : output_(std::move(output)) {}
  std::unique_ptr<FrontendAction> create() override { return std::make_unique<WritePch>(output_); }

 private:
  std::string output_;
};

// Answers the one command that compiles the prefix header.
class OneCommand : public CompilationDatabase {
 public:
  explicit OneCommand(CompileCommand command) : command_(std::move(command)) {}
  std::vector<CompileCommand> getCompileCommands(llvm::StringRef) const override { return {command_}; }

 private:
  CompileCommand command_;
};

}  // namespace

std::string defaultPchCacheDir() {
  if (const char *env = std::getenv("ACC_MIGRATE_CACHE")) return env;
  const char *home = std::getenv("HOME");
  return home ? std::string(home) + "/.cache/acc/migrate-pch" : "";
}

PchCache::PchCache(std::string dir, std::vector<std::string> extraArgs)
    : dir_(std::move(dir)), extraArgs_(std::move(extraArgs)) {}

std::string PchCache::pchFor(const CompileCommand &command) {
  std::vector<std::string> flags = sharedFlags(command);
  llvm::MD5 md5;
  for (llvm::StringRef part : {llvm::StringRef(CLANG_VERSION_STRING), llvm::StringRef(ACC_CLANG_RESOURCE_DIR),
                               llvm::StringRef(kPrefix), llvm::StringRef(kBuild),
                               llvm::StringRef(command.Directory)}) {
    md5.update(part);
    md5.update(llvm::ArrayRef<uint8_t>{0});
  }
  for (const std::vector<std::string> *list : {&flags, &extraArgs_})
    for (const std::string &arg : *list) {
      md5.update(arg);
      md5.update(llvm::ArrayRef<uint8_t>{0});
    }
  llvm::MD5::MD5Result digest;
  md5.final(digest);
  std::string key(digest.digest().str());

  std::lock_guard<std::mutex> lock(mutex_);
  auto known = known_.find(key);
  if (known != known_.end()) return known->second;
  std::string pch = dir_ + "/" + key + ".pch";
  if (!fs::exists(pch)) {
    CompileCommand forPch = command;
    forPch.CommandLine = flags;
    pch = build(forPch, key);
  }
  known_[key] = pch;
  return pch;
}

std::string PchCache::build(const CompileCommand &command, const std::string &key) {
  if (std::error_code ec = fs::create_directories(dir_)) {
    llvm::errs() << "acc-migrate: note: no PCH cache (" << dir_ << ": " << ec.message()
                 << "); each file parses torch's headers in full\n";
    return "";
  }
  // The prefix header stays in the cache: clang checks a PCH's inputs when it loads it.
  std::string header = dir_ + "/torch-prefix.h";
  if (!fs::exists(header)) {
    std::error_code ec;
    llvm::raw_fd_ostream out(header, ec);
    if (ec) return "";
    out << kPrefix;
  }
  llvm::errs() << "acc-migrate: precompiling torch's headers for these flags (once; cached in " << dir_ << ")\n";
  CompileCommand forHeader = command;
  forHeader.Filename = header;
  if (forHeader.CommandLine.empty()) forHeader.CommandLine.push_back("clang-tool");
  forHeader.CommandLine.insert(forHeader.CommandLine.begin() + 1, {"-x", "c++-header"});
  forHeader.CommandLine.push_back(header);
  OneCommand database(forHeader);
  // Its own working directory, as in Driver.cpp: other threads are parsing meanwhile.
  ClangTool tool(database, {header}, std::make_shared<PCHContainerOperations>(), llvm::vfs::createPhysicalFileSystem());
  tool.appendArgumentsAdjuster(getInsertArgumentAdjuster("-resource-dir=" ACC_CLANG_RESOURCE_DIR,
                                                         ArgumentInsertPosition::END));
  tool.appendArgumentsAdjuster(getInsertArgumentAdjuster(
      CommandLineArguments(extraArgs_.begin(), extraArgs_.end()), ArgumentInsertPosition::BEGIN));
  IgnoringDiagConsumer quiet;
  tool.setDiagnosticConsumer(&quiet);
  tool.setPrintErrorMessage(false);
  // Written under a name of its own, then renamed: runs in parallel never see a partial PCH.
  std::string temp = dir_ + "/" + key + ".pch.tmp" + std::to_string(llvm::sys::Process::getProcessId());
  WritePchFactory factory(temp);
  std::string pch = dir_ + "/" + key + ".pch";
  if (tool.run(&factory) != 0 || !fs::exists(temp) || fs::rename(temp, pch)) {
    fs::remove(temp);
    return "";  // these flags do not compile torch/torch.h (no torch, or a project without it)
  }
  return pch;
}

void PchCache::discard(const std::string &pch) {
  std::lock_guard<std::mutex> lock(mutex_);
  fs::remove(pch);
  for (auto it = known_.begin(); it != known_.end();)
    it = it->second == pch ? known_.erase(it) : std::next(it);
}

}  // namespace accmigrate
