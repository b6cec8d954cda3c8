// Whether the process that wrote a temporary is gone, the one rule for every temporary acc-migrate
// leaves when it is killed: the PCH cache's (PchCache.h) and those of the files it writes
// (WriteTemporaries.h). A temporary's name carries its writer, "<host>.<pid>" (writerTag), from the
// moment it exists. It is dead when that host is this machine and no process has that pid, or, whoever
// wrote it, when it has not been written to for a day (a writer writes it in seconds and renames it).
//
// Why a pid in the name rather than an flock held while writing: the name says who writes from the
// moment the file exists, where a lock is taken only after the create, so a cleaner could take it in
// between and remove a live writer's file; and flock is local-only or absent on some NFS mounts, where
// shared home directories (a PCH cache, a source tree) live. Its limits: a dead writer whose pid a new
// process has taken stays until it is a day old; a writer in another pid namespace under the same host
// name (a container given the host's name, sharing the directory) could lose its temporary.
#pragma once
#include <llvm/Support/Chrono.h>

#include <optional>
#include <string>

namespace accmigrate {

// This machine's name as temporaries carry it: a pid means something only on the machine that has
// it. Its host name, characters other than letters, digits and '-' as '-' (a name part never holds
// a '.', which separates the parts).
const std::string &hostTag();

// "<host>.<pid>": the writer as a temporary's name gives it.
std::string writerTag(long pid);

struct Writer {
  std::string host;
  long pid;
};

// Why the temporary written by `writer` (nullopt: a name from a version that did not name its writer)
// and last modified at `modified` is a dead writer's, as a phrase for a note ("process 42 of this
// machine has exited", "it is over a day old"); nullopt while its writer may be alive.
std::optional<std::string> deadWriter(const std::optional<Writer> &writer, llvm::sys::TimePoint<> modified);

}  // namespace accmigrate
