#pragma once
// POSIX file helpers shared by the checkpoint writers and readers; every failure is an acc::Error
// naming the path and the system's reason.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace acc::detail {

/// An open file descriptor closed on destruction.
class FileHandle {
 public:
  FileHandle() = default;
  FileHandle(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~FileHandle();
  FileHandle(FileHandle&& other) noexcept;
  FileHandle& operator=(FileHandle&& other) noexcept;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  void write_all(const void* data, size_t size);
  /// Closes now, reporting errors (the destructor cannot).
  void close();

 private:
  int fd_ = -1;
  std::string path_;
};

/// Creates or truncates `path` for writing; a symbolic link there is refused, never followed.
FileHandle create_file(const std::string& path);
/// Opens `path` for reading: a directory, FIFO, device or socket (or a symbolic link to one) is
/// refused with an error naming what it is, before anything is opened (no FIFO waits for a writer,
/// no device's open runs). Under a ConfinedReads of a directory above `path`, a file whose real
/// location is outside that directory (through a symbolic link) is a CheckpointError naming the link.
/// Every file a checkpoint reader opens goes through here.
FileHandle open_file(const std::string& path);

/// While alive, open_file refuses the files under `directory` that lead out of it (a symbolic link,
/// of the file or of a folder on the way, resolving outside): load_state and acc-merge-weights read
/// a checkpoint under one. Links that stay inside are followed. Per thread; nests.
class ConfinedReads {
 public:
  explicit ConfinedReads(const std::string& directory);
  ~ConfinedReads();
  ConfinedReads(const ConfinedReads&) = delete;
  ConfinedReads& operator=(const ConfinedReads&) = delete;

  struct Scope;

 private:
  Scope* previous_;
};

/// What `mode` is, for errors: "a directory", "a FIFO", "a device", "a socket".
std::string file_kind(unsigned mode);
uint64_t file_size(const FileHandle& file);
/// Reads exactly `size` bytes at `offset` (retrying short reads and EINTR); an error naming the
/// file when it cannot (including a file that ends first).
void read_exact_at(const FileHandle& file, void* out, size_t size, uint64_t offset);
/// Writes `path` through `write`, which fills the file at the path it is given: a new file beside
/// `path` under a random name (O_EXCL|O_NOFOLLOW: nobody can have planted a link there), fsynced and
/// renamed over `path`. The temporary is removed when `write` throws.
void write_file_atomically(const std::string& path, const std::function<void(const std::string&)>& write);
/// Writes `text` to `path` (created or truncated).
void write_text_file(const std::string& path, const std::string& text);
/// The whole file (open_file's checks).
std::string read_text_file(const std::string& path);
/// Removes a file or a directory tree; a missing path is not an error. (libtorch.so exports its
/// own std::filesystem::remove_all, which crashes when it interposes on libstdc++'s.)
void remove_tree(const std::string& path);
/// fsync of a file or directory.
void sync_path(const std::string& path);
[[noreturn]] void throw_system_error(const std::string& action, const std::string& path);

}  // namespace acc::detail
