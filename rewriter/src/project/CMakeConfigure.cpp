#include "project/CMakeConfigure.h"

#include "project/UserBuild.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MD5.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/Regex.h>
#include <set>

namespace fs = llvm::sys::fs;

namespace accmigrate {
namespace {

// What to show of a failed configure: from CMake's first "CMake Error" on, a few non-empty lines.
std::string firstErrorLines(llvm::StringRef log) {
  size_t start = log.find("CMake Error");
  if (start != llvm::StringRef::npos) log = log.drop_front(start);
  llvm::SmallVector<llvm::StringRef, 16> lines;
  log.split(lines, '\n', -1, /*KeepEmpty=*/false);
  std::vector<std::string> shown;
  for (llvm::StringRef line : lines) {
    if (line.trim().empty()) continue;
    shown.push_back(line.trim().str());
    if (shown.size() == 3) break;
  }
  return shown.empty() ? "no message" : llvm::join(shown, " | ");
}

// The packages CMake says it did not find. Its messages wrap lines, so whitespace is collapsed first.
std::vector<std::string> packagesNotFound(llvm::StringRef log) {
  std::string text;
  bool space = false;
  for (char c : log) {
    if (isspace(static_cast<unsigned char>(c))) {
      space = true;
      continue;
    }
    if (space && !text.empty()) text += ' ';
    space = false;
    text += c;
  }
  std::set<std::string> seen;
  std::vector<std::string> names;
  for (const char *pattern : {"provided by \"([^\"]+)\"", "configuration file for package \"([^\"]+)\"",
                              "Could NOT find ([A-Za-z0-9_.+-]+)"}) {
    llvm::Regex regex(pattern);
    llvm::StringRef rest = text;
    llvm::SmallVector<llvm::StringRef, 2> match;
    while (regex.match(rest, &match)) {
      if (seen.insert(match[1].str()).second) names.push_back(match[1].str());
      rest = rest.drop_front(match[0].data() - rest.data() + match[0].size());
    }
  }
  return names;
}

}  // namespace

Configured configureCMake(const std::string &top, const std::vector<std::string> &cacheArgs, unsigned timeoutSeconds) {
  Configured result;
  std::string &error = result.error;
  llvm::ErrorOr<std::string> cmake = llvm::sys::findProgramByName("cmake");
  if (!cmake) {
    error = "cmake not found on PATH";
    return result;
  }
  // The same directory for a project on every run (unless another run holds it): the build directory
  // is part of the torch PCH's key (PchCache.h), which a new name each run would rebuild (~20 s).
  llvm::SmallString<128> dir;
  llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, dir);
  llvm::sys::path::append(dir, "acc-migrate-cmake-" + llvm::toHex(llvm::MD5::hash(llvm::arrayRefFromStringRef(top)),
                                                                  /*LowerCase=*/true));
  std::error_code ec = fs::create_directory(dir, /*IgnoreExisting=*/false);
  if (ec) ec = fs::createUniqueDirectory("acc-migrate-cmake", dir);
  if (ec) {
    error = "cannot create a temporary build directory: " + ec.message();
    return result;
  }
  std::vector<std::string> args = {*cmake, "-S", top, "-B", std::string(dir), "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"};
  if (llvm::sys::findProgramByName("ninja")) args.insert(args.end(), {"-G", "Ninja"});
  args.insert(args.end(), cacheArgs.begin(), cacheArgs.end());
  // A configure that hangs (a download, a prompt, an execute_process) must not hang the tool, nor
  // leave its children behind: coreutils' timeout runs cmake in a process group of its own and kills
  // the whole group at the limit (llvm's Wait would kill cmake alone). Wait's own limit is the backstop.
  llvm::ErrorOr<std::string> timeout = llvm::sys::findProgramByName("timeout");
  if (timeout) args.insert(args.begin(), {*timeout, "--kill-after=5", std::to_string(timeoutSeconds)});
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::string log = std::string(dir) + "/acc-migrate-configure.log";
  std::optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(log), llvm::StringRef(log)};
  std::string message;
  bool failed = false;
  int status =
      llvm::sys::ExecuteAndWait(argv.front(), argv, std::nullopt, redirects, timeoutSeconds + 10, 0, &message, &failed);
  auto buffer = llvm::MemoryBuffer::getFile(log);
  if (buffer) result.packagesNotFound = packagesNotFound((*buffer)->getBuffer());
  for (const CacheEntry &entry : readCMakeCache(std::string(dir) + "/CMakeCache.txt"))
    if (llvm::StringRef(entry.value).endswith("-NOTFOUND")) result.entriesNotFound.push_back(entry.name);
  if (status == 0 && fs::exists(std::string(dir) + "/compile_commands.json")) {
    result.dir = std::string(dir);
    return result;
  }
  if (timeout && (status == 124 || status == 137))  // timeout's "timed out", and after --kill-after
    error = "cmake was stopped at the " + std::to_string(timeoutSeconds) + " s limit, with every process it started";
  else if (status == -2)
    error = "cmake crashed or was stopped at the " + std::to_string(timeoutSeconds) + " s limit" +
            (message.empty() ? "" : ": " + llvm::StringRef(message).rtrim(": ").str());
  else if (failed || status < 0)
    error = message.empty() ? "cmake did not run" : message;
  else
    error = buffer ? firstErrorLines((*buffer)->getBuffer()) : "cmake failed";
  fs::remove_directories(dir);
  return result;
}

}  // namespace accmigrate
