// The temporaries acc-migrate writes a file's new text to before renaming it over the file (Output.h:
// --in-place, its backups, the copies of --output-dir), and the removal of those a killed run left.
//
// A run killed between creating a temporary and renaming it leaves it beside its file:
// "<file>.acc-migrate-<host>.<pid>.<16 hex>", named for its writer (DeadWriter.h). The next run that
// writes into that directory removes the ones whose writer is dead, and says which: a run that only
// reads a directory (a dry run, the sources of --output-dir) changes nothing in it, and a temporary
// is removed wherever its file's change went since (edited by hand, renamed, no longer migrated),
// which cleaning only beside the files a run writes would miss. A live writer's temporary (another
// acc-migrate writing the same tree at the same time) stays.
#pragma once
#include "output/DeadWriter.h"

#include <llvm/ADT/StringRef.h>

#include <optional>
#include <string>
#include <vector>

namespace accmigrate {

// The start of the name of the temporary this process writes `target`'s new bytes to:
// "<target>.acc-migrate-<host>.<pid>."; acc_common's create_file_with_prefix adds 16 random hex digits.
std::string writeTemporaryPrefix(const std::string &target);

// A name (no directory) as acc-migrate names a temporary: nullopt when it is not one; else its writer,
// itself nullopt for "<file>.acc-migrate-<16 hex>" (versions before the writer was in the name). The
// hex digits are lower case, exactly 16, and end the name; <file> is not empty.
std::optional<std::optional<Writer>> parseWriteTemporary(llvm::StringRef name);

struct RemovedTemporary {
  std::string path;
  std::string why;  // DeadWriter.h's phrase: "process 42 of this machine has exited"
};

// Removes from directory `dir` (not below it) the temporaries whose writer is dead: names that
// parseWriteTemporary accepts, regular files (never a link, which is not followed either, a directory
// or a FIFO) owned by this user. What it removed, and why. Errors (a directory it cannot read, a file
// it cannot remove) remove nothing more and are not reported: writing into that directory reports them.
// Sorted by path.
std::vector<RemovedTemporary> removeDeadWriteTemporaries(const std::string &dir);

}  // namespace accmigrate
