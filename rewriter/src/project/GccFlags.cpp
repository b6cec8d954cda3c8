#include "project/GccFlags.h"

#include <clang/Driver/Options.h>
#include <llvm/Option/ArgList.h>
#include <llvm/Option/OptTable.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>

namespace fs = llvm::sys::fs;
namespace path = llvm::sys::path;
namespace options = clang::driver::options;

namespace accmigrate {

std::vector<std::string> GccFlags::forClang(const std::vector<std::string> &command) {
  if (command.empty()) return command;
  std::vector<const char *> argv;
  for (size_t i = 1; i < command.size(); ++i) argv.push_back(command[i].c_str());
  // As clang's driver parses in GCC mode: cl.exe's and the frontend's options do not count (a
  // /path/file.cpp would otherwise read as a cl.exe option).
  unsigned missingIndex = 0, missingCount = 0;
  llvm::opt::InputArgList args = clang::driver::getDriverOptTable().ParseArgs(
      argv, missingIndex, missingCount, /*FlagsToInclude=*/0,
      options::CLOption | options::CLDXCOption | options::DXCOption | options::NoDriverOption);
  std::set<unsigned> unknown;  // indices into argv
  bool openmp = false;
  for (const llvm::opt::Arg *arg : args) {
    if (arg->getOption().matches(options::OPT_UNKNOWN)) unknown.insert(arg->getIndex());
    if (arg->getOption().matches(options::OPT_fopenmp) || arg->getOption().matches(options::OPT_fopenmp_EQ))
      openmp = true;
  }
  std::vector<std::string> kept = {command[0]};
  std::vector<std::string> dropped;
  for (size_t i = 1; i < command.size(); ++i) (unknown.count(i - 1) ? dropped : kept).push_back(command[i]);

  std::lock_guard<std::mutex> lock(mutex_);
  std::string newlyDropped;
  for (const std::string &arg : dropped)
    if (reported_.insert(arg).second) newlyDropped += " " + arg;
  if (!newlyDropped.empty())
    llvm::errs() << "acc-migrate: dropped compiler options clang does not know:" << newlyDropped << "\n";
  if (openmp) {
    std::string include = gccIncludeDir(command[0]);
    // GCC 11's omp.h declares its allocators `__attribute__((__malloc__, __malloc__(omp_free)))`, a
    // form clang 16 rejects: the function-like macro removes only the form with arguments.
    if (!include.empty()) kept.insert(kept.end(), {"-idirafter", include, "-D__malloc__(...)="});
  }
  return kept;
}

std::string GccFlags::gccIncludeDir(const std::string &compiler) {
  if (gccInclude_) return *gccInclude_;
  gccInclude_ = "";
  // The database's compiler when it is GCC (its version's omp.h), else the gcc on PATH.
  llvm::StringRef name = path::filename(compiler);
  std::string program = compiler;
  if (!name.contains("gcc") && !name.contains("g++")) {
    llvm::ErrorOr<std::string> gcc = llvm::sys::findProgramByName("gcc");
    if (!gcc) return "";
    program = *gcc;
  } else if (!path::is_absolute(program)) {
    llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(program);
    if (!found) return "";
    program = *found;
  }
  llvm::SmallString<128> output;
  if (fs::createTemporaryFile("acc-migrate-gcc", "txt", output)) return "";
  std::optional<llvm::StringRef> redirects[] = {llvm::StringRef(""), llvm::StringRef(output), llvm::StringRef("")};
  int status = llvm::sys::ExecuteAndWait(program, {program, "-print-file-name=include"}, std::nullopt, redirects, 10);
  auto buffer = llvm::MemoryBuffer::getFile(output);
  fs::remove(output);
  if (status != 0 || !buffer) return "";
  std::string dir = (*buffer)->getBuffer().trim().str();
  if (fs::exists(dir + "/omp.h")) gccInclude_ = dir;
  return *gccInclude_;
}

}  // namespace accmigrate
