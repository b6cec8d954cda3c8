#include "Options.h"
#include "PchCache.h"

#include <acc_common/path_kind.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>
#include <cerrno>
#include <cstdlib>

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
  if (!out.buildDir.empty() && !llvm::sys::fs::is_directory(out.buildDir))
    return usage("-p '" + out.buildDir + "': not a directory; pass the build directory that holds compile_commands.json");
  return std::nullopt;
}

}  // namespace accmigrate
