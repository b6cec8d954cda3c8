#include "cli/Options.h"
#include "project/PchCache.h"

#include <acc_common/path_kind.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace cl = llvm::cl;

namespace accmigrate {

static const char *const kOverview = R"(acc-migrate: rewrite single-device libtorch training code for acc.

  acc-migrate [options] <file-or-directory>... [-- <compiler args>]

Prints the change as a unified diff (stdout) and what needs review (stderr); nothing is written unless
--in-place or --output-dir is given. Directories are searched for C++ sources (.cpp .cc .cxx); headers
of the project are rewritten through the sources that include them.

Compiler flags come from compile_commands.json: -p DIR, found in or above the inputs (or in build/
there), or in your build directory of the CMake project that builds them (build/, build-*,
cmake-build-*, out/, out/build/*); else from configuring that project in a temporary directory, with
the package locations your build directory's CMakeCache.txt holds (CMAKE_PREFIX_PATH, <Pkg>_DIR...);
files none of these list get flags inferred for libtorch (-std=c++17 and the torch include
directories of --torch, $Torch_DIR or the project venv $ACC_VENV); plus everything after `--`. A
header not found is named with the package most likely to provide it and the commands that pass it.

When it makes a CMake project find_package(acc), it prints the line that configures the project with
this acc (-Dacc_DIR=<the directory holding accConfig.cmake>).

Exit status: 0 every file was handled; 1 some file could not be parsed or migrated (it is left
byte-identical, named with clang's first error and whether its text has training code; the others
are still migrated); 2 usage error.
)";

// --pch-cache-limit, else $ACC_MIGRATE_CACHE_LIMIT, else the default. A usage error when unreadable.
static std::optional<std::string> readPchCacheLimit(const std::string &flag, Options &out) {
  const char *env = std::getenv("ACC_MIGRATE_CACHE_LIMIT");
  std::string text = !flag.empty() ? flag : (env ? env : "");
  out.pchCacheLimit = kDefaultPchCacheLimit;
  if (text.empty()) return std::nullopt;
  if (std::optional<uint64_t> bytes = parsePchCacheSize(text)) {
    out.pchCacheLimit = *bytes;
    return std::nullopt;
  }
  std::string source = !flag.empty() ? "--pch-cache-limit" : "$ACC_MIGRATE_CACHE_LIMIT";
  return source + " '" + text + "': not a size; give bytes or a whole number with K, M or G (e.g. 2G, 500M)" +
         (flag.empty() ? ", or unset it for the default 2G" : "");
}

// The paths flags name are looked at before anything runs, as the inputs are (acc_common/path_kind.h):
// clang's JSON reader would wait forever on a FIFO named compile_commands.json (or read a link to
// /dev/zero without end), and a report written to a FIFO nobody reads waits at the end of a long run.
// Each wrong kind is one usage error naming what the path is and what the flag takes.
using acc::common::PathKind;

// "'<path>': no such file or directory" or "'<path>' is a named pipe (FIFO)": the start of each message.
static std::string whatIs(const std::string &path, const PathKind &kind) {
  if (kind.error != 0 && !kind.is_link)
    return "'" + path + "': " + (kind.error == ENOENT ? "no such file or directory" : std::strerror(kind.error));
  return "'" + path + "' is " + kind.description();
}

// A directory the run reads (-p, --torch, --acc-include): it must be there, and be one.
static std::optional<std::string> checkReadDir(const std::string &dir, const std::string &takes) {
  PathKind kind = acc::common::inspect_path(dir);
  if (kind.directory()) return std::nullopt;
  return whatIs(dir, kind) + (kind.exists() ? ", not a directory; " : "; ") + takes;
}

// A directory the run creates or writes into (--output-dir, --pch-cache): missing is fine, anything
// but a directory (or a link to one) is not.
static std::optional<std::string> checkWriteDir(const std::string &dir, const std::string &takes) {
  PathKind kind = acc::common::inspect_path(dir);
  if (kind.directory() || (kind.error == ENOENT && !kind.is_link)) return std::nullopt;
  return whatIs(dir, kind) + (kind.exists() ? ", not a directory; " : "; ") + takes;
}

// A file the run writes at its end (--report, --sarif). A regular file, or a new one in an existing
// directory, is written. A character device is written as a shell redirection would (/dev/null, and
// /dev/stdout on a terminal). A FIFO (also /dev/stdout or /dev/fd/N on a pipe) is written when a
// process reads it now: it is opened here without blocking and held open until the end, so that
// its reader waits for the report instead of seeing an empty stream; with no reader, the write would
// wait forever, so it is refused. A directory, a socket or a block device (writing would overwrite a
// disk) is refused.
static std::optional<std::string> checkOutputFile(const std::string &file, const std::string &flag,
                                                  std::vector<int> &held) {
  const std::string fix = "; give " + flag + " a regular file (or /dev/stdout)";
  PathKind kind = acc::common::inspect_path(file);
  if ((kind.error == ENOENT || kind.error == ENOTDIR) && !kind.is_link) {
    llvm::SmallString<256> parent(file);
    llvm::sys::path::remove_filename(parent);
    if (parent.empty()) parent = ".";
    PathKind dir = acc::common::inspect_path(std::string(parent));
    if (dir.directory()) return std::nullopt;
    const std::string where = std::string(parent);
    return "'" + file + "': " +
           (dir.exists() ? "'" + where + "' is " + dir.description() + ", not a directory"
                         : "its directory '" + where + "' does not exist") +
           "; give " + flag + " a file in an existing directory";
  }
  // A dangling link is written through, creating its target, as a shell redirection would.
  if (kind.error == ENOENT && kind.is_link) return std::nullopt;
  if (kind.error != 0) return whatIs(file, kind) + fix;
  if (kind.regular() || S_ISCHR(kind.type)) return std::nullopt;
  if (S_ISFIFO(kind.type)) {
    int fd = ::open(file.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd >= 0) {
      held.push_back(fd);
      return std::nullopt;
    }
    if (errno == ENXIO)
      return whatIs(file, kind) + " that no process is reading (writing to it would wait for one); start its "
                                  "reader first, or give " + flag + " a regular file";
    return whatIs(file, kind) + " that cannot be opened (" + std::strerror(errno) + ")" + fix;
  }
  if (S_ISBLK(kind.type))
    return whatIs(file, kind) + ", not a file (writing " + flag + " there would overwrite the device)" + fix;
  return whatIs(file, kind) + ", not a file" + fix;
}

// Every path a flag names, in the order of --help; `pchCacheGiven`: --pch-cache without --no-pch-cache.
static std::optional<std::string> checkFlagPaths(Options &out, bool pchCacheGiven) {
  if (!out.buildDir.empty()) {
    if (auto error = checkReadDir(out.buildDir, "-p takes the build directory that holds compile_commands.json"))
      return error;
    // Missing, it is named by the database's own error later (with the CMake option that writes it).
    std::string database = out.buildDir + "/compile_commands.json";
    PathKind kind = acc::common::inspect_path(database);
    if (!kind.regular() && !(kind.error == ENOENT && !kind.is_link))
      return whatIs(database, kind) + (kind.exists() ? ", not a regular file" : "") +
             "; -p takes a build directory whose compile_commands.json CMake wrote (configure it with "
             "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON)";
  }
  if (!out.torchDir.empty())
    if (auto error = checkReadDir(out.torchDir, "--torch takes the libtorch root or the torch Python package directory"))
      return error;
  if (!out.accInclude.empty())
    if (auto error = checkReadDir(out.accInclude, "--acc-include takes the directory that holds acc/acc.h"))
      return error;
  if (!out.outputDir.empty())
    if (auto error = checkWriteDir(out.outputDir, "--output-dir takes a directory to write the migrated copy into "
                                                  "(created when missing)"))
      return error;
  if (pchCacheGiven)
    if (auto error = checkWriteDir(out.pchCache, "--pch-cache takes a directory for the precompiled headers (created "
                                                 "when missing), or use --no-pch-cache"))
      return error;
  // Last: a FIFO with a reader is opened here, and no later error should leave its reader an empty stream.
  if (!out.reportFile.empty())
    if (auto error = checkOutputFile(out.reportFile, "--report", out.heldOutputs)) return error;
  if (!out.sarifFile.empty())
    if (auto error = checkOutputFile(out.sarifFile, "--sarif", out.heldOutputs)) return error;
  return std::nullopt;
}

std::optional<int> parseOptions(int argc, const char **argv, Options &out) {
  static cl::OptionCategory category("acc-migrate options");
  static cl::list<std::string> inputs(cl::Positional, cl::desc("<file-or-directory>..."), cl::cat(category));
  static cl::opt<std::string> buildDir("p", cl::desc("Build directory containing compile_commands.json"),
                                       cl::value_desc("dir"), cl::cat(category));
  static cl::opt<std::string> torchDir("torch", cl::desc("libtorch root, or the torch Python package directory"),
                                       cl::value_desc("dir"), cl::cat(category));
  static cl::opt<std::string> accInclude("acc-include", cl::desc("Directory containing acc/acc.h (default: found "
                                                                 "next to this executable or in the source tree)"),
                                         cl::value_desc("dir"), cl::cat(category));
  static cl::opt<bool> inPlace("in-place", cl::desc("Rewrite the files (each replaced atomically)"), cl::cat(category));
  static cl::opt<std::string> backup("backup-suffix", cl::desc("With --in-place, keep the original as FILE<suffix>"),
                                     cl::value_desc("suffix"), cl::cat(category));
  static cl::opt<std::string> outputDir("output-dir", cl::desc("Write a migrated copy of the input tree into DIR"),
                                        cl::value_desc("dir"), cl::cat(category));
  static cl::opt<std::string> report("report", cl::desc("Write edits, findings and failures as JSON"),
                                     cl::value_desc("file"), cl::cat(category));
  static cl::opt<std::string> sarif("sarif", cl::desc("Write findings and edits as SARIF 2.1.0"),
                                    cl::value_desc("file"), cl::cat(category));
  static cl::opt<bool> listRules("list-rules", cl::desc("List the rules and the finalizers, and exit"),
                                 cl::cat(category));
  static cl::opt<std::string> rules("rules", cl::desc("Rules to apply: 'default', 'all', names (--rules=backward: that "
                                                      "rule alone), '+name'/'-name' to add a rule to the defaults or "
                                                      "drop one from them (--rules=-device-move, "
                                                      "--rules=+fsdp-units); the finalizers "
                                                      "(create-accelerator, include-acc, cmake-link) always run"),
                                    cl::value_desc("list"), cl::cat(category));
  static cl::opt<std::string> fsdpUnits(
      "fsdp-units",
      cl::desc("Module types (e.g. Block or BlockImpl, comma-separated) that FSDP FULL_SHARD wraps as units: each "
               "forward starts with `acc::ForwardHooksGuard forward_hooks(*this);` (enables the rule fsdp-units)"),
      cl::value_desc("types"), cl::cat(category));
  static cl::opt<std::string> pchCache("pch-cache", cl::desc("Directory of precompiled torch headers reused across runs "
                                                             "(default $ACC_MIGRATE_CACHE or ~/.cache/acc/migrate-pch)"),
                                        cl::value_desc("dir"), cl::cat(category));
  static cl::opt<std::string> pchCacheLimit(
      "pch-cache-limit",
      cl::desc("Size the PCH cache is kept under: bytes, or with K, M or G (default $ACC_MIGRATE_CACHE_LIMIT or 2G); "
               "the precompiled headers unused for longest are removed, never those this run uses"),
      cl::value_desc("size"), cl::cat(category));
  static cl::opt<bool> noPch("no-pch-cache", cl::desc("Parse torch's headers in full for every file"), cl::cat(category));
  static cl::opt<unsigned> jobs("j", cl::desc("Files parsed in parallel (default: one per CPU)"), cl::init(0),
                                cl::value_desc("n"), cl::cat(category));

  // Everything after `--` goes to the compiler, untouched by our parser.
  int ownArgc = argc;
  for (int i = 1; i < argc; ++i)
    if (llvm::StringRef(argv[i]) == "--") {
      ownArgc = i;
      for (int j = i + 1; j < argc; ++j) out.extraArgs.push_back(argv[j]);
      break;
    }
  // LLVM already owns `--color` (WithColor, a cl::boolOrDefault); the diff uses the same switch.
  auto &registered = cl::getRegisteredOptions();
  auto *color = registered.count("color") ? static_cast<cl::opt<cl::boolOrDefault> *>(registered["color"]) : nullptr;
  if (color) {
    color->setDescription("Colour the diff: --color or --color=false (default: when stdout is a terminal)");
    color->Categories.assign(1, &category);
  }
  cl::HideUnrelatedOptions(category);
  std::string errors;
  llvm::raw_string_ostream errs(errors);
  if (!cl::ParseCommandLineOptions(ownArgc, argv, kOverview, &errs)) {
    llvm::errs() << errs.str() << "run `acc-migrate --help` for the options\n";
    return ExitUsage;
  }
  out.inputs = inputs;
  out.buildDir = buildDir;
  out.torchDir = torchDir;
  out.accInclude = accInclude;
  out.inPlace = inPlace;
  out.backupSuffix = backup;
  out.outputDir = outputDir;
  out.reportFile = report;
  out.sarifFile = sarif;
  if (color && color->getValue() != cl::BOU_UNSET)
    out.color = color->getValue() == cl::BOU_TRUE ? ColorMode::Always : ColorMode::Never;
  out.listRules = listRules;
  out.rules = rules;
  llvm::SmallVector<llvm::StringRef> types;
  llvm::StringRef(fsdpUnits).split(types, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef type : types)
    if (!type.trim().empty()) out.fsdpUnits.push_back(type.trim().str());
  out.jobs = jobs;
  out.pchCache = noPch ? "" : (pchCache.empty() ? defaultPchCacheDir() : std::string(pchCache));
  if (out.listRules) return std::nullopt;

  auto usage = [](const llvm::Twine &message) {
    llvm::errs() << "acc-migrate: error: " << message << "\n";
    return ExitUsage;
  };
  if (out.inputs.empty()) return usage("no input files or directories; usage: acc-migrate [options] <path>... (see --help)");
  if (out.inPlace && !out.outputDir.empty())
    return usage("--in-place and --output-dir exclude each other; choose where the migrated files go");
  if (!out.backupSuffix.empty() && !out.inPlace) return usage("--backup-suffix needs --in-place");
  if (std::optional<std::string> error = readPchCacheLimit(pchCacheLimit, out)) return usage(*error);
  if (fsdpUnits.getNumOccurrences() && out.fsdpUnits.empty())
    return usage("--fsdp-units names no type; give the module types FSDP wraps as units: --fsdp-units=TypeA,TypeB");
  for (const std::string &input : out.inputs) {
    // Looked at without opening: clang would wait forever to read a FIFO (or /dev/zero) named as a source.
    const acc::common::PathKind kind = acc::common::inspect_path(input);
    if (kind.error == ENOENT && !kind.is_link) return usage("'" + input + "': no such file or directory");
    if (!kind.regular() && !kind.directory())
      return usage("'" + input + "' is " + kind.description() +
                   ", not a source file or a directory; give C++ sources (.cpp .cc .cxx) or directories holding them");
  }
  if (std::optional<std::string> error = checkFlagPaths(out, pchCache.getNumOccurrences() && !noPch))
    return usage(*error);
  return std::nullopt;
}

}  // namespace accmigrate
