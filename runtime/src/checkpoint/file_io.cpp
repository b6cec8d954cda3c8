#include "checkpoint/file_io.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <acc/errors.h>
#include <acc_common/new_file.h>

namespace acc::detail {

void throw_system_error(const std::string& action, const std::string& path) {
  throw Error("acc: cannot " + action + " '" + path + "': " + std::strerror(errno));
}

FileHandle::~FileHandle() {
  if (fd_ >= 0) ::close(fd_);
}

FileHandle::FileHandle(FileHandle&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) {
  other.fd_ = -1;
}

FileHandle& FileHandle::operator=(FileHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

void FileHandle::write_all(const void* data, size_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; loop for larger tensors and for partial writes.
    const ssize_t written = ::write(fd_, bytes, size < (1u << 30) ? size : (1u << 30));
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_system_error("write", path_);
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

void FileHandle::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw_system_error("close", path_);
}

FileHandle create_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ELOOP) {
    throw Error("acc: '" + path + "' is a symbolic link; acc writes only regular files it creates (remove the link)");
  }
  if (fd < 0) throw_system_error("create", path);
  return FileHandle(fd, path);
}

static std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

FileHandle open_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer forever. The kind is checked on
  // the open descriptor, so nothing can be swapped in between the check and the read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw_system_error("open", path);
  FileHandle file(fd, path);
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw_system_error("stat", path);
  if (!S_ISREG(info.st_mode)) {
    throw Error("acc: '" + path + "' is " + file_kind(info.st_mode) + ", not a file acc can read; name a regular file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return file;
}

uint64_t file_size(const FileHandle& file) {
  struct stat info {};
  if (::fstat(file.fd(), &info) != 0) throw_system_error("stat", file.path());
  return static_cast<uint64_t>(info.st_size);
}

void read_exact_at(const FileHandle& file, void* out, size_t size, uint64_t offset) {
  auto* bytes = static_cast<char*>(out);
  for (size_t done = 0; done < size;) {
    const ssize_t got = ::pread(file.fd(), bytes + done, size - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_system_error("read", file.path());
    if (got == 0) throw Error("acc: '" + file.path() + "' ends before the bytes it should hold (truncated?)");
    done += static_cast<size_t>(got);
  }
}

void write_file_atomically(const std::string& path, const std::function<void(const std::string&)>& write) {
  auto reserved = common::create_file_beside(path);
  if (reserved.fd < 0) throw_system_error("create a file beside", path);
  ::close(reserved.fd);
  try {
    write(reserved.path);
    sync_path(reserved.path);
    if (std::rename(reserved.path.c_str(), path.c_str()) != 0) throw_system_error("rename into", path);
  } catch (...) {
    ::unlink(reserved.path.c_str());
    throw;
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  auto file = create_file(path);
  file.write_all(text.data(), text.size());
  file.close();
}

std::string read_text_file(const std::string& path) {
  const auto file = open_file(path);
  std::string bytes(file_size(file), '\0');
  read_exact_at(file, bytes.data(), bytes.size(), 0);
  return bytes;
}

void remove_tree(const std::string& path) {
  auto remove_one = [](const char* entry, const struct stat*, int, struct FTW*) {
    return ::remove(entry) == 0 || errno == ENOENT ? 0 : -1;
  };
  if (::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT) {
    throw_system_error("remove", path);
  }
}

void sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_system_error("open for fsync", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) throw_system_error("fsync", path);
}

}  // namespace acc::detail
