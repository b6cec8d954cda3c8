#pragma once
// What a path the user named is, found without opening it, and regular files opened so that nothing
// blocks. Opening a FIFO waits for a writer, reading /dev/zero never ends, some devices act when opened,
// and reading a directory through a stream throws: every path a tool opens or execs on the user's word
// is looked at here first, so that a wrong one gets one line naming what it is instead of a hang or an
// abort. Torch-free: the launcher, acc-migrate and the runtime may all use it.
#include <sys/types.h>

#include <optional>
#include <string>

namespace acc::common {

struct PathKind {
  int error = 0;         // errno of stat() (following links) when it failed: ENOENT for a missing path
  mode_t type = 0;       // the S_IFMT bits of what stat() found, when error == 0
  bool is_link = false;  // the name itself is a symbolic link (lstat), dangling or not

  bool exists() const { return error == 0; }
  bool regular() const;
  bool directory() const;
  // "a regular file", "a directory", "a named pipe (FIFO)", "a character device", "a block device",
  // "a socket"; "a symbolic link to a directory" (and so on) when the name is a link; "a dangling
  // symbolic link" or "missing (<reason>)" when stat() failed.
  std::string description() const;
};

// stat() and lstat() of `path`; never opens it.
PathKind inspect_path(const std::string& path);

// The words for an S_IFMT type: "a directory", "a named pipe (FIFO)", ...
std::string file_type_words(mode_t type);

// A regular file opened for reading without blocking: the path is looked at first (a FIFO or a device
// is never opened), then opened with O_NONBLOCK|O_NOCTTY|O_CLOEXEC and looked at again through the
// descriptor (had it been swapped for a FIFO in between, open returns at once and fstat refuses it).
struct OpenedFile {
  int fd = -1;       // -1 when refused or failed
  int error = 0;     // errno when stat/open/fstat failed
  PathKind kind;     // what is there
  long long size = 0;
  // Why it was not opened, for "<path> <problem>": "does not exist", "is a directory, not a regular
  // file", "cannot be opened (Permission denied)"; empty when it was.
  std::string problem() const;
};
OpenedFile open_regular_file(const std::string& path);

// The whole text of a regular file of at most `max_bytes`, read as above. nullopt with `*problem` set
// (as OpenedFile::problem, or "is over <max_bytes> bytes") when it is anything else.
std::optional<std::string> read_regular_file(const std::string& path, long long max_bytes, std::string* problem);

}  // namespace acc::common
