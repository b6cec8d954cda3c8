#pragma once
// Files and directories that nobody else can redirect. A predictable name ("out.tmp") in a directory
// another user can write to is a trap: a link planted there makes the writer overwrite the link's
// target. Everything acc writes through a temporary is created here instead: a random hidden name
// beside the target, opened with O_CREAT|O_EXCL|O_NOFOLLOW (a link or an existing file at that name is
// refused, never followed), written, fsynced and renamed over the target (rename replaces a link at
// the target itself, never its target). Torch-free: the launcher, the runtime and their tests use it.
#include <sys/types.h>

#include <string>

namespace acc::common {

// `bytes` random bytes from the kernel, as 2*bytes lowercase hex digits.
std::string random_hex(size_t bytes);

// A file just created for writing: the caller writes to fd, then commits it with commit_new_file
// (or closes and unlinks it).
struct NewFile {
  int fd = -1;
  std::string path;
};

// A new file named `prefix` + 16 random hex digits + `suffix`, O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|
// O_CLOEXEC, `mode` before the umask. fd -1 and errno set when it cannot be created. For writers whose
// temporaries follow a naming scheme of their own (acc-migrate's PCH cache names the writing host and
// process, so that a later run can tell a dead writer's leftovers).
NewFile create_file_with_prefix(const std::string& prefix, const std::string& suffix, mode_t mode = 0666);

// A new file beside `target`: "<directory>/.<name>.<16 hex>.tmp", as create_file_with_prefix.
NewFile create_file_beside(const std::string& target, mode_t mode = 0666);

// Writes all of `size` bytes at `data` to the new file. Empty on success, else a message naming the
// file and the system's reason.
std::string write_new_file(const NewFile& file, const char* data, size_t size);

// Closes and removes a new file that will not be committed (a write failed).
void abandon_new_file(NewFile& file);

// The whole write of a small file: a new file beside `target`, `contents`, fsync, rename over
// `target`, fsync of the directory. Empty on success, else a message naming the path and the
// system's reason (the temporary is removed; `target` is untouched).
std::string replace_file(const std::string& target, const std::string& contents, mode_t mode = 0666);

// fsync, close and rename `file` over `target`, then fsync of the directory. Empty on success,
// else a message as above (the temporary is removed).
std::string commit_new_file(NewFile& file, const std::string& target);

// A new directory beside `target` named "<directory>/.<name><infix><16 hex>" created with mkdir
// (which, like O_EXCL, fails on any existing name, a link included), `mode` before the umask. Empty
// with errno set when it cannot be created.
std::string create_directory_beside(const std::string& target, const std::string& infix, mode_t mode = 0777);

}  // namespace acc::common
