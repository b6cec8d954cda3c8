#include "project/PchCache.h"
#include "acc_common/new_file.h"
#include "output/DeadWriter.h"

#include <clang/Basic/Version.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Frontend/MultiplexConsumer.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Lex/PreprocessorOptions.h>
#include <clang/Serialization/ASTWriter.h>
#include <clang/Serialization/PCHContainerOperations.h>
#include <clang/Tooling/ArgumentsAdjusters.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MD5.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Process.h>
#include <llvm/Support/Regex.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
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

// Builds the PCH with the given flags into memory (`bytes`): clang's own output file (a temporary
// beside the output name, or that name itself when it is not a regular file, a link to a device
// say) never touches the cache; store() writes the bytes under a name of its own.
class WritePch : public GeneratePCHAction {
 public:
  WritePch(std::string pch, llvm::SmallVectorImpl<char> &bytes) : pch_(std::move(pch)), bytes_(bytes) {}
  bool BeginInvocation(CompilerInstance &ci) override {
    // Instantiate the templates torch's headers use once, in the PCH, instead of in every file.
    ci.getLangOpts().PCHInstantiateTemplates = true;
    // acc-migrate never looks inside torch's functions: without their bodies the PCH is smaller, and
    // each file instantiates torch's templates for its types without parsing their code.
    ci.getFrontendOpts().SkipFunctionBodies = true;
    return true;
  }

 protected:
  // GeneratePCHAction::CreateASTConsumer with a stream into `bytes` for the output file.
  std::unique_ptr<ASTConsumer> CreateASTConsumer(CompilerInstance &ci, llvm::StringRef inFile) override {
    std::string sysroot;
    if (!ComputeASTConsumerArguments(ci, sysroot)) return nullptr;
    if (!ci.getFrontendOpts().RelocatablePCH) sysroot.clear();
    const FrontendOptions &options = ci.getFrontendOpts();
    auto buffer = std::make_shared<PCHBuffer>();
    std::vector<std::unique_ptr<ASTConsumer>> consumers;
    consumers.push_back(std::make_unique<PCHGenerator>(
        ci.getPreprocessor(), ci.getModuleCache(), pch_, sysroot, buffer, options.ModuleFileExtensions,
        ci.getPreprocessorOpts().AllowPCHWithCompilerErrors, options.IncludeTimestamps,
        +ci.getLangOpts().CacheGeneratedPCH));
    consumers.push_back(ci.getPCHContainerWriter().CreatePCHContainerGenerator(
        ci, inFile.str(), pch_, std::make_unique<llvm::raw_svector_ostream>(bytes_), buffer));
    return std::make_unique<MultiplexConsumer>(std::move(consumers));
  }

 private:
  std::string pch_;
  llvm::SmallVectorImpl<char> &bytes_;
};

class WritePchFactory : public FrontendActionFactory {
 public:
  WritePchFactory(std::string pch, llvm::SmallVectorImpl<char> &bytes) : pch_(std::move(pch)), bytes_(bytes) {}
  std::unique_ptr<FrontendAction> create() override { return std::make_unique<WritePch>(pch_, bytes_); }

 private:
  std::string pch_;
  llvm::SmallVectorImpl<char> &bytes_;
};

// Answers the one command that compiles the prefix header.
class OneCommand : public CompilationDatabase {
 public:
  explicit OneCommand(CompileCommand command) : command_(std::move(command)) {}
  std::vector<CompileCommand> getCompileCommands(llvm::StringRef) const override { return {command_}; }

 private:
  CompileCommand command_;
};

// Compiles `header` with `command`'s flags into `bytes`. False when they cannot compile it.
bool compileHeader(const CompileCommand &command, const std::string &header, const std::string &pch,
                   const std::vector<std::string> &extraArgs, llvm::SmallVectorImpl<char> &bytes) {
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
      CommandLineArguments(extraArgs.begin(), extraArgs.end()), ArgumentInsertPosition::BEGIN));
  IgnoringDiagConsumer quiet;
  tool.setDiagnosticConsumer(&quiet);
  tool.setPrintErrorMessage(false);
  WritePchFactory factory(pch, bytes);
  return tool.run(&factory) == 0 && !bytes.empty();
}

void noteNoCache(const std::string &error) {
  llvm::errs() << "acc-migrate: note: no PCH cache (" << error
               << "); each file parses torch's headers in full. Give a writable directory with space "
                  "for ~90 MB a flag set: --pch-cache DIR or $ACC_MIGRATE_CACHE\n";
}

bool isRegularFile(const std::string &file) {
  fs::file_status status;
  return !fs::status(file, status, /*Follow=*/false) && fs::is_regular_file(status);
}

// A PCH's mtime is when a run last took it: trimming removes those unused for longest. Not its atime:
// noatime mounts never update it, relatime once a day at most. A failure (a cache of another user's)
// only makes the order less exact.
void markUsed(const std::string &pch) { ::utimensat(AT_FDCWD, pch.c_str(), nullptr, AT_SYMLINK_NOFOLLOW); }

std::string temporaryPrefix(const std::string &name, long pid) { return name + "." + writerTag(pid) + "."; }

// The writer a temporary's name gives; nullopt for a name the cache does not make.
std::optional<Writer> writerOf(llvm::StringRef name) {
  static const llvm::Regex current(
      "^([0-9a-f]{32}\\.pch|torch-prefix\\.h)\\.([A-Za-z0-9-]+)\\.([0-9]+)\\.[0-9a-f]{16}\\.tmp$");
  // Before this version: <key>.pch.tmp<pid>, which clang wrote through <key>.pch-<8 hex>.tmp<pid>.tmp.
  static const llvm::Regex previous("^[0-9a-f]{32}\\.pch(\\.|-[0-9a-f]{8}\\.)tmp([0-9]+)(\\.tmp)?$");
  llvm::SmallVector<llvm::StringRef, 4> match;
  long pid;
  if (current.match(name, &match) && !match[3].getAsInteger(10, pid)) return Writer{match[2].str(), pid};
  if (previous.match(name, &match) && !match[2].getAsInteger(10, pid)) return Writer{hostTag(), pid};
  return std::nullopt;
}

struct CachedPch {
  std::string path;
  uint64_t size;
  llvm::sys::TimePoint<> used;
};

std::vector<CachedPch> cachedPchs(const std::string &dir) {
  static const llvm::Regex pchName("^[0-9a-f]{32}\\.pch$");
  std::vector<CachedPch> pchs;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    fs::file_status status;
    if (!pchName.match(path::filename(it->path())) || fs::status(it->path(), status, /*Follow=*/false) ||
        !fs::is_regular_file(status))
      continue;
    pchs.push_back({it->path(), status.getSize(), status.getLastModificationTime()});
  }
  return pchs;
}

// `bytes` in a new file named `prefix` + 16 hex + ".tmp" (O_EXCL|O_NOFOLLOW), renamed over `target`:
// readers never see a partial file, and a link planted at either name is never followed. Empty on
// success, else the reason.
std::string writeNewFile(const std::string &prefix, const std::string &target, llvm::StringRef bytes) {
  acc::common::NewFile file = acc::common::create_file_with_prefix(prefix, ".tmp");
  if (file.fd < 0) return "cannot create a file in " + path::parent_path(prefix).str() + ": " + std::strerror(errno);
  std::string error = acc::common::write_new_file(file, bytes.data(), bytes.size());
  if (!error.empty()) {
    acc::common::abandon_new_file(file);
    return error;
  }
  return acc::common::commit_new_file(file, target);
}

}  // namespace

std::string defaultPchCacheDir() {
  if (const char *env = std::getenv("ACC_MIGRATE_CACHE")) return env;
  const char *home = std::getenv("HOME");
  return home ? std::string(home) + "/.cache/acc/migrate-pch" : "";
}

std::optional<uint64_t> parsePchCacheSize(llvm::StringRef text) {
  unsigned shift = 0;
  switch (text.empty() ? 0 : llvm::toLower(text.back())) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
  }
  if (shift) text = text.drop_back();
  uint64_t value;
  if (text.empty() || !llvm::all_of(text, llvm::isDigit) || text.getAsInteger(10, value)) return std::nullopt;
  if (value > (UINT64_MAX >> shift)) return std::nullopt;
  return value << shift;
}

std::string pchTemporaryPrefix(const std::string &key, long pid) { return temporaryPrefix(key + ".pch", pid); }

void removeDeadPchTemporaries(const std::string &dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    std::optional<Writer> writer = writerOf(path::filename(it->path()));
    fs::file_status status;
    if (!writer || fs::status(it->path(), status, /*Follow=*/false) || fs::is_directory(status)) continue;
    if (deadWriter(*writer, status.getLastModificationTime())) fs::remove(it->path());
  }
}

void trimPchCache(const std::string &dir, uint64_t limitBytes, const std::set<std::string> &keep) {
  std::vector<CachedPch> pchs = cachedPchs(dir);
  uint64_t total = 0;
  for (const CachedPch &pch : pchs) total += pch.size;
  std::sort(pchs.begin(), pchs.end(), [](const CachedPch &a, const CachedPch &b) { return a.used < b.used; });
  std::set<std::string> kept;
  for (const std::string &file : keep) kept.insert(path::filename(file).str());
  for (const CachedPch &pch : pchs) {
    if (total <= limitBytes) break;
    if (kept.count(path::filename(pch.path).str())) continue;
    if (!fs::remove(pch.path)) total -= pch.size;
  }
}

PchCache::PchCache(std::string dir, std::vector<std::string> extraArgs, uint64_t limitBytes)
    : dir_(std::move(dir)), extraArgs_(std::move(extraArgs)), limitBytes_(limitBytes) {
  removeDeadPchTemporaries(dir_);
}

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
  // Only a regular file is a cached PCH: anything else at its name (a link) is replaced by a build.
  if (isRegularFile(pch)) {
    markUsed(pch);
  } else {
    CompileCommand forPch = command;
    forPch.CommandLine = flags;
    pch = build(forPch, key);
  }
  known_[key] = pch;
  return pch;
}

std::string PchCache::build(const CompileCommand &command, const std::string &key) {
  if (std::error_code ec = fs::create_directories(dir_)) {
    noteNoCache(dir_ + ": " + ec.message());
    return "";
  }
  std::string header = dir_ + "/torch-prefix.h";
  if (!writePrefixHeader(header)) return "";
  llvm::errs() << "acc-migrate: precompiling torch's headers for these flags (once; cached in " << dir_ << ")\n";
  llvm::SmallVector<char, 0> bytes;
  std::string pch = dir_ + "/" + key + ".pch";
  if (!compileHeader(command, header, pch, extraArgs_, bytes))
    return "";  // these flags do not compile torch/torch.h (no torch, or a project without it)
  pch = store(key, llvm::StringRef(bytes.data(), bytes.size()));
  if (pch.empty()) return "";
  std::set<std::string> keep = inUse();
  keep.insert(pch);
  trimPchCache(dir_, limitBytes_, keep);
  return pch;
}

// The prefix header stays in the cache: clang checks a PCH's inputs when it loads it. Only a regular
// file with the prefix's text is taken for it; anything else at its name (a link) is replaced.
bool PchCache::writePrefixHeader(const std::string &header) {
  if (isRegularFile(header)) {
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text = llvm::MemoryBuffer::getFile(header);
    if (text && (*text)->getBuffer() == kPrefix) return true;
  }
  std::string error = writeNewFile(dir_ + "/" + temporaryPrefix("torch-prefix.h", ::getpid()), header, kPrefix);
  if (error.empty()) return true;
  noteNoCache(error);
  return false;
}

// Runs in parallel never see a partial PCH: it is written under a name of this process's, then renamed.
std::string PchCache::store(const std::string &key, llvm::StringRef bytes) {
  std::string pch = dir_ + "/" + key + ".pch";
  std::string error = writeNewFile(dir_ + "/" + pchTemporaryPrefix(key, ::getpid()), pch, bytes);
  if (error.empty()) return pch;
  noteNoCache(error);
  return "";
}

std::set<std::string> PchCache::inUse() const {
  std::set<std::string> pchs;
  for (const auto &entry : known_)
    if (!entry.second.empty()) pchs.insert(entry.second);
  return pchs;
}

void PchCache::discard(const std::string &pch) {
  std::lock_guard<std::mutex> lock(mutex_);
  fs::remove(pch);
  for (auto it = known_.begin(); it != known_.end();)
    it = it->second == pch ? known_.erase(it) : std::next(it);
}

}  // namespace accmigrate
