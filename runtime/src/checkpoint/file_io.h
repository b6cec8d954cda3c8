#pragma once
// POSIX file helpers shared by the checkpoint writers and readers; every failure is an acc::Error
// naming the path and the system's reason.
#include <cstddef>
#include <cstdint>
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

/// Creates or truncates `path` for writing.
FileHandle create_file(const std::string& path);
/// Opens `path` for reading.
FileHandle open_file(const std::string& path);
/// Reads exactly `size` bytes at `offset` (retrying short reads and EINTR); an error naming the
/// file when it cannot (including a file that ends first).
void read_exact_at(const FileHandle& file, void* out, size_t size, uint64_t offset);
/// Writes `text` to `path` (created or truncated).
void write_text_file(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);
/// Removes a file or a directory tree; a missing path is not an error. (libtorch.so exports its
/// own std::filesystem::remove_all, which crashes when it interposes on libstdc++'s.)
void remove_tree(const std::string& path);
/// fsync of a file or directory.
void sync_path(const std::string& path);
[[noreturn]] void throw_system_error(const std::string& action, const std::string& path);

}  // namespace acc::detail
