// Files that nobody else can redirect. A predictable name ("train.cpp.tmp", "<key>.pch.tmp<pid>") in
// a directory another user can write to is a trap: a link planted there makes the writer overwrite
// the link's target. Everything acc-migrate writes (in-place sources and their backups, --output-dir
// copies, the PCH cache's files) goes through here instead: a new file under a random name beside
// the target, created with O_CREAT|O_EXCL|O_NOFOLLOW (an existing name, a link included, is refused,
// never followed), written, fsynced and renamed over the target (rename replaces a link at the
// target itself, never what it points to). The runtime's acc_common/new_file.h does the same for
// acc's other writers; acc-migrate links only LLVM and Clang, so it has its own.
#pragma once
#include <llvm/ADT/StringRef.h>

#include <string>

namespace accmigrate {

struct NewFile {
  int fd = -1;  // open for writing; -1 when it could not be created
  std::string path;
};

// `bytes` random bytes from the kernel, as 2*bytes lowercase hex digits.
std::string randomHex(size_t bytes);

// Creates `prefix` + 16 random hex digits + `suffix` (O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC,
// `mode` before the umask). On failure fd is -1 and `error` names the directory and the reason.
NewFile createNewFile(const std::string &prefix, const std::string &suffix, unsigned mode, std::string &error);

// Writes all of `bytes`. On failure, false with `error` naming the file and the reason.
bool writeAll(const NewFile &file, llvm::StringRef bytes, std::string &error);

// fsync, close, rename over `target`, fsync of the directory: after a crash `target` is either what
// it was or the whole new text. On failure, false with `error`; the new file is removed.
bool commitNewFile(NewFile &file, const std::string &target, std::string &error);

// Closes and removes a new file that will not be committed (a write failed).
void abandonNewFile(NewFile &file);

}  // namespace accmigrate
