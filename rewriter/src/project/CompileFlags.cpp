#include "project/CompileFlags.h"

#include "project/CMakeConfigure.h"
#include "project/CMakeProject.h"
#include "project/GccFlags.h"
#include "project/UserBuild.h"

#include <acc_common/path_kind.h>
#include <clang/Tooling/JSONCompilationDatabase.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>
#include <algorithm>
#include <cstdlib>
#include <set>

using namespace clang::tooling;
namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;

namespace accmigrate {
namespace {

// A build's precompiled header (CMake's `-include .../cmake_pch.hxx` next to a GCC .gch) is the
// compiler's cache, not part of the program: clang cannot read GCC's PCH, and the header only
// repeats includes the sources have. Dropping it keeps such projects parseable.
std::vector<std::string> withoutBuildPch(const std::vector<std::string> &args) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool pchInclude = args[i] == "-include" && i + 1 < args.size() &&
                            llvm::StringRef(args[i + 1]).contains("cmake_pch.hxx");
    if (pchInclude) {
      ++i;
      continue;
    }
    if (args[i] == "-Winvalid-pch") continue;
    kept.push_back(args[i]);
  }
  return kept;
}

// Commands from the project's database; files it does not list (programs outside the build, headers)
// get the inferred command instead of a guess from an unrelated file.
class FallbackDatabase : public CompilationDatabase {
 public:
  FallbackDatabase(std::unique_ptr<CompilationDatabase> primary, std::unique_ptr<CompilationDatabase> fallback)
      : primary_(std::move(primary)), fallback_(std::move(fallback)) {}
  std::vector<CompileCommand> getCompileCommands(llvm::StringRef file) const override {
    std::vector<CompileCommand> commands;
    if (primary_) commands = primary_->getCompileCommands(file);
    if (commands.empty()) return fallback_->getCompileCommands(file);
    for (auto &command : commands) command.CommandLine = gcc_.forClang(withoutBuildPch(command.CommandLine));
    return commands;
  }
  std::vector<std::string> getAllFiles() const override { return primary_ ? primary_->getAllFiles() : std::vector<std::string>{}; }

 private:
  std::unique_ptr<CompilationDatabase> primary_, fallback_;
  mutable GccFlags gcc_;
};

bool isDir(const llvm::Twine &p) { return fs::is_directory(p); }

// A torch installation in any of its shapes: libtorch root, Python package dir, or its include dir.
std::vector<std::string> includeDirsOf(const std::string &root) {
  for (std::string candidate : {root, root + "/include", root + "/torch/include"}) {
    if (isDir(candidate + "/torch/csrc/api/include") && isDir(candidate + "/ATen"))
      return {candidate, candidate + "/torch/csrc/api/include"};
  }
  return {};
}

std::string venvTorch() {
  const char *env = std::getenv("ACC_VENV");
  const char *home = std::getenv("HOME");
  std::string venv = env ? env : (home ? std::string(home) + "/.cache/acc/venv" : "");
  if (venv.empty()) return "";
  std::error_code ec;
  for (fs::directory_iterator it(venv + "/lib", ec), end; it != end && !ec; it.increment(ec)) {
    std::string candidate = it->path() + "/site-packages/torch";
    if (isDir(candidate)) return candidate;
  }
  return "";
}

// acc's headers: next to an installed acc-migrate (<prefix>/include), or in the source tree it was
// built from, where acc/acc.h's includes of acc/environment.h and the generated acc/version.h live
// elsewhere (contract/, the build tree; the install puts all three in include/acc).
std::vector<std::string> findAccInclude(const Options &options, const char *argv0) {
  if (!options.accInclude.empty()) return {options.accInclude};
  std::string exe = fs::getMainExecutable(argv0, reinterpret_cast<void *>(&findAccInclude));
  std::string installed = path::parent_path(path::parent_path(exe)).str() + "/include";
  if (fs::exists(installed + "/acc/acc.h")) return {installed};
  std::string source = ACC_SOURCE_DIR;
  if (fs::exists(source + "/runtime/include/acc/acc.h"))
    return {source + "/runtime/include", source + "/contract", ACC_GENERATED_INCLUDE_DIR};
  return {};
}

bool buildsAny(const cmake::Project &project, const std::vector<std::string> &sources) {
  return std::any_of(sources.begin(), sources.end(),
                     [&](const std::string &source) { return !project.targetsOf(source).empty(); });
}

std::string scopeRoot(const std::string &input) {
  llvm::SmallString<256> dir(input);
  fs::make_absolute(dir);
  if (!isDir(dir)) path::remove_filename(dir);
  path::remove_dots(dir, /*remove_dot_dot=*/true);
  return std::string(dir);
}

// Directories named include, and those holding headers, under `root` (build trees and hidden
// directories skipped).
std::vector<std::string> projectIncludeDirs(const std::string &root) {
  std::set<std::string> dirs;
  std::error_code ec;
  size_t seen = 0;
  for (fs::recursive_directory_iterator it(root, ec), end; it != end && !ec && ++seen < 20000; it.increment(ec)) {
    llvm::StringRef name = path::filename(it->path());
    if (it->type() == fs::file_type::directory_file) {
      if (name.startswith(".") || name == "build" || name.startswith("build-")) it.no_push();
      else if (name == "include") dirs.insert(it->path());
      continue;
    }
    llvm::StringRef ext = path::extension(name);
    if (ext == ".h" || ext == ".hpp" || ext == ".hh" || ext == ".hxx") dirs.insert(path::parent_path(it->path()).str());
  }
  return {dirs.begin(), dirs.end()};
}

// The project's find_package calls that found nothing in the configure: named in its output, or a
// cache entry left *-NOTFOUND that belongs to the package (<Pkg>_DIR for config mode; a find
// module's results, EIGEN3_INCLUDE_DIR for find_package(Eigen3), are named after it in capitals).
std::vector<MissedPackage> missedPackages(const cmake::Project &project, const Configured &configured) {
  std::vector<MissedPackage> missed;
  for (const cmake::ListsFile &file : project.files())
    for (const cmake::Command &command : file.commands) {
      if (command.name != "find_package" || command.args.empty()) continue;
      std::string name = command.args[0].text;
      std::string upper = llvm::StringRef(name).upper();
      bool notFound =
          std::count(configured.packagesNotFound.begin(), configured.packagesNotFound.end(), name) ||
          std::any_of(configured.entriesNotFound.begin(), configured.entriesNotFound.end(), [&](llvm::StringRef e) {
            return e == name + "_DIR" || e.startswith(name + "_") || e.startswith(upper + "_");
          });
      bool listed = std::any_of(missed.begin(), missed.end(), [&](const MissedPackage &m) { return m.name == name; });
      if (notFound && !listed) missed.push_back({name, file.path, command.line});
    }
  return missed;
}

}  // namespace

std::vector<std::string> torchIncludeDirs(const Options &options) {
  if (!options.torchDir.empty()) return includeDirsOf(options.torchDir);
  if (const char *torchCmake = std::getenv("Torch_DIR")) {
    // <root>/share/cmake/Torch
    std::vector<std::string> dirs = includeDirsOf(path::parent_path(path::parent_path(path::parent_path(torchCmake))).str());
    if (!dirs.empty()) return dirs;
  }
  std::string venv = venvTorch();
  return venv.empty() ? std::vector<std::string>{} : includeDirsOf(venv);
}

// How long configuring a project may take: 120 s, or $ACC_MIGRATE_CONFIGURE_TIMEOUT seconds (a
// project whose configure downloads dependencies needs more; the tests need less).
unsigned configureTimeoutSeconds() {
  const char *value = std::getenv("ACC_MIGRATE_CONFIGURE_TIMEOUT");
  unsigned seconds = 0;
  if (value && !llvm::StringRef(value).getAsInteger(10, seconds) && seconds > 0) return seconds;
  return 120;
}

std::vector<std::string> torchCacheArgs(const Options &options) {
  if (const char *torchCmake = std::getenv("Torch_DIR")) return {std::string("-DTorch_DIR=") + torchCmake};
  if (std::getenv("CMAKE_PREFIX_PATH")) return {};  // CMake reads it from the environment
  std::vector<std::string> include = torchIncludeDirs(options);
  if (include.empty()) return {};
  std::string config = path::parent_path(include.front()).str() + "/share/cmake/Torch";
  if (!isDir(config)) return {};
  return {"-DTorch_DIR=" + config};
}

CompileFlags::~CompileFlags() {
  if (!temporaryBuildDir.empty()) fs::remove_directories(temporaryBuildDir);
}

std::unique_ptr<CompileFlags> makeCompileFlags(const Options &options, const std::vector<std::string> &sources,
                                               const char *argv0, std::string &error) {
  auto flags = std::make_unique<CompileFlags>();
  std::unique_ptr<CompilationDatabase> json;
  std::string jsonDir = options.buildDir;
  std::optional<cmake::Project> project = cmake::Project::enclosing(sources.front());
  std::string top = project ? project->top : "";
  bool projectBuildsSources = project && buildsAny(*project, sources);
  flags->projectTop = top;
  if (jsonDir.empty()) {
    // build/compile_commands.json in or above the first input, as clangd and clang-tidy look for it;
    // not above the CMake project that builds the sources (one there is another project's).
    llvm::SmallString<256> dir(options.inputs.front());
    fs::make_absolute(dir);
    if (!isDir(dir)) path::remove_filename(dir);
    // Only a regular file is read: clang's JSON reader would wait forever on a FIFO of that name (or
    // read a link to /dev/zero without end); anything else is named and passed over.
    auto isDatabase = [](const std::string &candidate) {
      const acc::common::PathKind kind = acc::common::inspect_path(candidate);
      if (!kind.exists()) return false;
      if (kind.regular()) return true;
      llvm::errs() << "acc-migrate: note: '" << candidate << "' is " << kind.description()
                   << ", not a compilation database; it is passed over\n";
      return false;
    };
    for (; !dir.empty(); dir = path::parent_path(dir)) {
      if (isDatabase((dir + "/compile_commands.json").str())) { jsonDir = dir.str().str(); break; }
      if (isDatabase((dir + "/build/compile_commands.json").str())) { jsonDir = (dir + "/build").str(); break; }
      if (projectBuildsSources && dir == top) break;
    }
  }
  // The user's own build of the project (cmake-build-debug/, out/build/x64-Debug/...): its
  // compile_commands.json is the flags the sources are built with; without one, its cache knows
  // where the packages are that a configure of ours would not find.
  std::optional<UserBuild> userBuild;
  // A build/ with a database found above the inputs, below the project's top, is the user's build
  // too: the advice and the configure line name it.
  if (!jsonDir.empty() && options.buildDir.empty() && project && fs::exists(jsonDir + "/CMakeCache.txt") &&
      llvm::StringRef(scopeRoot(jsonDir)).startswith(top + "/"))
    flags->userBuildDir = scopeRoot(jsonDir);
  if (jsonDir.empty() && project) {
    userBuild = findUserBuild(top);
    if (userBuild) flags->userBuildDir = userBuild->dir;
    if (userBuild && userBuild->hasCompileCommands) jsonDir = userBuild->dir;
  }
  // No database, and a CMake project that builds the sources: its own configure writes one.
  std::string carriedText;
  if (jsonDir.empty() && projectBuildsSources) {
    std::vector<std::string> cacheArgs = torchCacheArgs(options);
    if (userBuild) {
      // After ours: the user's Torch_DIR, if they have one, is the torch they build with.
      PackageHints hints = packageHints(*userBuild);
      cacheArgs.insert(cacheArgs.end(), hints.cacheArgs.begin(), hints.cacheArgs.end());
      flags->carried = hints.names;
      carriedText = hints.names.empty()
                        ? " (its build directory " + userBuild->dir + " has no package locations to carry)"
                        : ", with the package locations of its build directory " + userBuild->dir + " (" +
                              llvm::join(hints.names, ", ") + ")";
    }
    Configured configured = configureCMake(top, cacheArgs, configureTimeoutSeconds());
    jsonDir = flags->temporaryBuildDir = configured.dir;
    flags->configureError = configured.error;
    flags->missedPackages = missedPackages(*project, configured);
  }
  if (!jsonDir.empty()) {
    std::string loadError;
    json = JSONCompilationDatabase::loadFromFile(jsonDir + "/compile_commands.json", loadError,
                                                 JSONCommandLineSyntax::AutoDetect);
    if (!json && !options.buildDir.empty()) {
      error = "-p " + options.buildDir + ": " + loadError +
              "; configure the build with -DCMAKE_EXPORT_COMPILE_COMMANDS=ON or drop -p to infer flags";
      return nullptr;
    }
  }

  std::vector<std::string> inferred = {"-std=c++17"};
  std::vector<std::string> torch = torchIncludeDirs(options);
  for (const std::string &dir : torch) inferred.insert(inferred.end(), {"-isystem", dir});
  for (const std::string &dir : findAccInclude(options, argv0)) inferred.insert(inferred.end(), {"-isystem", dir});
  if (!json) {
    // The project's own headers (`#include "model.h"` from another directory): after every other
    // directory, so that they never shadow a system header of the same name.
    std::string root = projectBuildsSources ? top : scopeRoot(options.inputs.front());
    for (const std::string &dir : projectIncludeDirs(root)) inferred.insert(inferred.end(), {"-idirafter", dir});
  }
  auto fixed = std::make_unique<FixedCompilationDatabase>(".", inferred);

  std::string inferredText;
  for (const std::string &arg : inferred) inferredText += " " + arg;
  for (const std::string &arg : options.extraArgs) inferredText += " " + arg;  // the driver adds these
  if (json && !flags->temporaryBuildDir.empty()) {
    flags->origin = CompileFlags::Origin::Configured;
    flags->description = "no compile_commands.json found; flags from configuring the CMake project " + top +
                         " in a temporary directory" + carriedText + "; files it does not list use" + inferredText;
  } else if (json) {
    flags->origin = CompileFlags::Origin::Database;
    flags->databaseDir = jsonDir;
    flags->description = "flags from " + jsonDir + "/compile_commands.json" +
                         (userBuild && jsonDir == userBuild->dir ? " (the build directory of the CMake project " + top + ")"
                                                                 : std::string()) +
                         "; files it does not list use" + inferredText;
  } else if (!flags->configureError.empty()) {
    flags->description = "no compile_commands.json found; configuring the CMake project " + top + carriedText +
                         " failed (" + flags->configureError + "); inferred flags:" + inferredText;
  } else {
    flags->description = "no compile_commands.json found (pass -p DIR); inferred flags:" + inferredText;
  }
  if (json)
    for (const std::string &file : json->getAllFiles()) {
      llvm::SmallString<256> normal(file);
      path::remove_dots(normal, /*remove_dot_dot=*/true);
      flags->databaseFiles.insert(std::string(normal));
    }
  if (torch.empty())
    flags->description += "\nacc-migrate: torch headers not found: pass --torch DIR, set Torch_DIR, or run scripts/setup";
  flags->database = std::make_unique<FallbackDatabase>(std::move(json), std::move(fixed));
  return flags;
}

}  // namespace accmigrate
